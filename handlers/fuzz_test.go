package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

// fuzzTools is every tool the worker serves, in a fixed order so a fuzz
// input's selector byte picks the same tool on every run.
var fuzzTools = []string{"agents_list", "session_status", "sessions_history", "sessions_list", "sessions_send", "sessions_spawn", "sessions_yield", "subagents"}

// FuzzToolCall is the whole request path of every tool through a real
// server and worker: the envelope (token header, body) and each tool's
// parameter decoding. Whatever the body, the reply is a result or a coded
// error a caller can act on (never 500 or a hang), and the worker keeps
// answering.
func FuzzToolCall(f *testing.F) {
	for i, body := range []string{
		"", "{}", "null", "[]", "{} {}", `{"sessionKey":"main"}`, `{"sessionKey":"agent:main:main","limit":3}`,
		`{"message":"hi","sessionKey":"main"}`, `{"task":"x","agentId":"../x"}`, `{"task":"x","label":"a\u0000b"}`,
		`{"action":"kill","target":"all"}`, `{"limit":1e400}`, `{"kinds":["main",1]}`, `{"model":"\ud800"}`,
		"{\"sessionKey\":\"\xff\"}", `{"a":1,"a":2}`, `{"sessionKey":"agent:main:main","sessionKey":"agent:other:main"}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	s := handlerstest.Start(f, nil)
	tok := s.Token(bus.Caller{SessionKey: "agent:main:main", AgentID: "main"})
	f.Fuzz(func(t *testing.T, sel uint8, body []byte) {
		tool := fuzzTools[int(sel)%len(fuzzTools)]
		if tool == "sessions_send" {
			// No gateway runs the turn it starts, so a waiting send would
			// only time out: the fuzzer gets the fire-and-forget form
			// (FuzzParams covers timeoutSeconds' decoding).
			var p map[string]any
			if json.Unmarshal(body, &p) == nil && p != nil {
				p["timeoutSeconds"] = 0
				body, _ = json.Marshal(p)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, err := bus.Call(ctx, s.Conn, s.Worker.Deps.Names, tok, tool, body)
		if err == nil {
			return
		}
		var be *bus.Error
		if !errors.As(err, &be) {
			t.Fatalf("%s %q: %v, want a result or a coded error", tool, body, err)
		}
		if !slices.Contains([]int{bus.CodeBadRequest, bus.CodeForbidden, bus.CodeNotFound, bus.CodeTooLarge}, be.Code) || be.Message == "" {
			t.Fatalf("%s %q: %d %q, want a 4xx with a message", tool, body, be.Code, be.Message)
		}
	})
}
