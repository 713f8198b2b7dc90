package handlers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

// badInputBase is a call each tool would otherwise accept, so a refusal
// is the bad input's doing; bad inputs are added to it.
var badInputBase = map[string]map[string]any{
	"agents_list":      {},
	"session_status":   {},
	"sessions_history": {"sessionKey": mainKey},
	"sessions_list":    {},
	"sessions_send":    {"sessionKey": mainKey, "message": "hi", "timeoutSeconds": 0},
	"sessions_spawn":   {"task": "x"},
	"sessions_yield":   {},
	"subagents":        {"action": "list"},
}

// The parameters through which each tool takes a session key, an agent id
// and a number; a tool without one has nothing to refuse in that case.
var (
	keyParam    = map[string]string{"session_status": "sessionKey", "sessions_history": "sessionKey", "sessions_send": "sessionKey"}
	agentParam  = map[string]string{"sessions_list": "agentId", "sessions_send": "agentId", "sessions_spawn": "agentId"}
	numberParam = map[string]string{
		"session_status": "changesSince", "sessions_history": "limit", "sessions_list": "limit",
		"sessions_send": "timeoutSeconds", "sessions_spawn": "runTimeoutSeconds", "subagents": "recentMinutes",
	}
)

// streamState is what a refused call must leave unchanged: every stream,
// KV buckets included (they are streams too).
func streamState(t *testing.T, s *handlerstest.Stack) map[string][2]uint64 {
	t.Helper()
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := map[string][2]uint64{}
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		out[info.Config.Name] = [2]uint64{info.State.Msgs, info.State.LastSeq}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Bad input through NATS, for every tool: each gets a coded error that
// says what was wrong, the worker keeps serving, no goroutine is left
// behind and nothing is written.
func TestBadInputEveryTool(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.MustCall(mainKey, "sessions_list", `{}`) // warm: the client's reply plumbing exists before the leak check
	// a second session of another agent, so a "../" key is not merely unknown
	s.MustCall("agent:other:main", "sessions_list", `{}`)
	ignore := goleak.IgnoreCurrent()
	before := streamState(t, s)
	if len(before) == 0 {
		t.Fatal("no streams listed: the unchanged check would check nothing")
	}

	merge := func(tool string, extra map[string]any) []byte {
		m := map[string]any{}
		for k, v := range badInputBase[tool] {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// raw splices text into the base object: for bodies json.Marshal
	// cannot produce (invalid UTF-8, duplicate names, deep nesting).
	raw := func(tool, fields string) []byte {
		b := merge(tool, nil)
		if string(b) == "{}" {
			return []byte("{" + fields + "}")
		}
		return []byte("{" + fields + "," + string(b[1:]))
	}
	pad := func(tool string, size int) []byte {
		return merge(tool, map[string]any{"pad": strings.Repeat("a", size)})
	}
	type badCase struct {
		name string
		body func(tool string) []byte // nil: not applicable to this tool
		code int
		want string // a substring of the message
		// returned names the tools that answer this case, as the
		// reference does, with a returned {status:"error"} (want in its
		// error) rather than a thrown one.
		returned map[string]bool
	}
	cases := []badCase{
		{"over the tool limit", func(tool string) []byte { return pad(tool, bus.MaxRequestBytes) }, bus.CodeTooLarge, "the limit is 1048576 bytes", nil},
		{"over the server max payload", func(tool string) []byte { return pad(tool, 4<<20+1) }, bus.CodeTooLarge, "the server accepts at most", nil},
		{"invalid UTF-8", func(tool string) []byte { return raw(tool, "\"label\":\"a\xff\xfeb\"") }, bus.CodeBadRequest, "request body is not valid UTF-8 (bad byte 0xFF at byte 11)", nil},
		{"JSON nested 100,000 levels", func(tool string) []byte {
			return raw(tool, `"label":`+strings.Repeat("[", 100000)+strings.Repeat("]", 100000))
		}, bus.CodeBadRequest, "parameters nest more than 64 levels deep", nil},
		{"100,000-character parameter name", func(tool string) []byte {
			return raw(tool, `"`+strings.Repeat("k", 100000)+`":1`)
		}, bus.CodeBadRequest, "a parameter name is 100000 characters long", nil},
		{"NUL in a value", func(tool string) []byte { return raw(tool, `"label":"a\u0000b"`) }, bus.CodeBadRequest, `parameter "label" contains a NUL character`, nil},
		{"NUL in a name", func(tool string) []byte { return raw(tool, `"label\u0000":"a"`) }, bus.CodeBadRequest, `parameter name "label\x00" contains a NUL character`, nil},
		{"duplicate names", func(tool string) []byte { return raw(tool, `"label":"a","label":"b"`) }, bus.CodeBadRequest, `parameter "label" appears twice in one object`, nil},
		{"duplicate session keys", func(tool string) []byte {
			return raw(tool, `"sessionKey":"agent:main:main","sessionKey":"agent:other:main"`)
		}, bus.CodeBadRequest, `parameter "sessionKey" appears twice in one object`, nil},
		{"100,000-character session key", func(tool string) []byte {
			if keyParam[tool] == "" {
				return nil
			}
			return merge(tool, map[string]any{keyParam[tool]: "agent:main:" + strings.Repeat("k", 100000)})
		}, bus.CodeBadRequest, "is invalid: it is 100011 bytes long; use a key of at most 256 bytes", nil},
		{"../ in a session key", func(tool string) []byte {
			if keyParam[tool] == "" {
				return nil
			}
			return merge(tool, map[string]any{keyParam[tool]: "agent:main:../other"})
		}, bus.CodeBadRequest, `sessionKey "agent:main:../other" is invalid`, nil},
		{"../ as a session key segment", func(tool string) []byte {
			if keyParam[tool] == "" {
				return nil
			}
			return merge(tool, map[string]any{keyParam[tool]: "agent:..:main"})
		}, bus.CodeBadRequest, `sessionKey "agent:..:main" is invalid`, nil},
		{"../ agent id", func(tool string) []byte {
			if agentParam[tool] == "" {
				return nil
			}
			return merge(tool, map[string]any{agentParam[tool]: "../other"})
		}, bus.CodeBadRequest, `agentId "../other"`, map[string]bool{"sessions_spawn": true}},
		{"huge number", func(tool string) []byte {
			if numberParam[tool] == "" {
				return nil
			}
			return raw(tool, `"`+numberParam[tool]+`":1e999999`)
		}, bus.CodeBadRequest, numberParamWant, nil},
		{"huge integer", func(tool string) []byte {
			// subagents' recentMinutes clamps any finite number to
			// 1..1440, as the reference does; 1e999999 above is refused.
			if numberParam[tool] == "" || tool == "subagents" {
				return nil
			}
			return raw(tool, `"`+numberParam[tool]+`":123456789012345678901234567890`)
		}, bus.CodeBadRequest, numberParamWant, nil},
	}
	tok := s.Token(bus.Caller{SessionKey: mainKey, AgentID: "main"})
	for _, c := range cases {
		for _, tool := range fuzzTools {
			body := c.body(tool)
			if body == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			reply, err := bus.Call(ctx, s.Conn, s.Worker.Deps.Names, tok, tool, body)
			cancel()
			want := c.want
			if want == numberParamWant {
				want = numberParam[tool]
			}
			if c.returned[tool] {
				var r struct{ Status, Error string }
				if err != nil || json.Unmarshal(reply, &r) != nil || r.Status != "error" || !strings.Contains(r.Error, want) {
					t.Errorf("%s, %s: got %s %v, want a returned error containing %q", c.name, tool, reply, err, want)
				}
				continue
			}
			e, ok := bus.AsError(err)
			if !ok || e.Code != c.code || !strings.Contains(e.Message, want) {
				t.Errorf("%s, %s: got %v, want %d containing %q", c.name, tool, err, c.code, want)
			}
			if ok && len(e.Message) > 600 {
				t.Errorf("%s, %s: a %d-byte message echoes the input", c.name, tool, len(e.Message))
			}
		}
	}
	// the worker still serves, nothing was written, nothing was left running
	s.MustCall(mainKey, "sessions_list", `{}`)
	after := streamState(t, s)
	for name, st := range before {
		if after[name] != st {
			t.Errorf("stream %s changed: %v -> %v", name, st, after[name])
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("stream %s was created", name)
		}
	}
	goleak.VerifyNone(t, ignore)
}

// numberParamWant stands for "the message names the tool's number
// parameter" in the table above.
const numberParamWant = "\x00number parameter"
