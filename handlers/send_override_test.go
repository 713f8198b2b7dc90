package handlers_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// TestSendPolicyOverrideOp: sb.ops.session.send-policy sets the entry's
// sendPolicy (on allow, off deny, inherit none), which sessions_send then
// obeys; a bad word and an unknown session are refused writing nothing.
func TestSendPolicyOverrideOp(t *testing.T) {
	is := startInbound(t)
	op := func(key, word string) (map[string]any, error) {
		body, _ := json.Marshal(map[string]string{"sessionKey": key, "sendPolicy": word})
		reply, err := bus.SessionOp(bustest.Context(t), is.Conn, bus.NewNames(""), "send-policy", is.Token(bus.Caller{Adapter: bus.AnyChannel}), body)
		if err != nil {
			return nil, err
		}
		var out map[string]any
		if err := json.Unmarshal(reply, &out); err != nil {
			t.Fatalf("reply %s: %v", reply, err)
		}
		return out, nil
	}
	stored := func() string {
		e, _, err := is.Worker.Deps.Store.Get(bustest.Context(t), humanKey)
		if err != nil {
			t.Fatal(err)
		}
		return e.SendPolicy
	}
	send := func() string {
		res := is.MustCall("agent:main:main", "sessions_send", fmt.Sprintf(`{"sessionKey":%q,"message":"hello x","timeoutSeconds":0}`, humanKey))
		s, _ := res["error"].(string)
		return s
	}
	for _, step := range []struct{ word, status, stored, effective string }{
		{"off", "set", "deny", "deny"},
		{"OFF", "unchanged", "deny", "deny"},
		{"on", "set", "allow", "allow"},
		{"inherit", "set", "", "allow"},
	} {
		res, err := op(humanKey, step.word)
		if err != nil || res["status"] != step.status || res["sendPolicy"] != step.stored || res["effective"] != step.effective {
			t.Fatalf("%s: %v %v", step.word, res, err)
		}
		if got := stored(); got != step.stored {
			t.Fatalf("%s: stored %q, want %q", step.word, got, step.stored)
		}
		if step.word == "off" {
			// sessions_send reads the worker's index, which takes the
			// write from its watch a moment later
			bustest.WaitFor(t, 10*time.Second, "the index to hold the override", func() bool {
				e := is.Worker.Deps.Index.Get(humanKey)
				return e != nil && e.SendPolicy == step.stored
			})
			if got := send(); got != rules.SendBlockedError {
				t.Fatalf("sessions_send with the override off: %q", got)
			}
		}
	}
	if _, err := op(humanKey, "maybe"); code(err) != bus.CodeBadRequest || !strings.Contains(err.Error(), `send policy "maybe" must be on, off or inherit`) {
		t.Fatalf("bad word: %v", err)
	}
	if _, err := op("agent:main:nobody", "off"); code(err) != bus.CodeNotFound {
		t.Fatalf("unknown session: %v", err)
	}
	if stored() != "" {
		t.Fatalf("a refused change wrote %q", stored())
	}
}

// runsDone counts the runs a gateway finished handling, after-run hooks
// (reply delivery) included.
type runsDone struct{ n atomic.Int64 }

func (o *runsDone) RunStarted()             {}
func (o *runsDone) RunDone(string)          { o.n.Add(1) }
func (o *runsDone) Redelivered()            {}
func (o *runsDone) Delivered(string, error) {}

// TestInboundSendCommand: /send off stops the turn replies of the session
// from being delivered to its channel (the run still runs and answers the
// waiting adapter); /send inherit brings them back; /send shows the
// setting and its answers are always delivered.
func TestInboundSendCommand(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script", Script: map[string]any{"rules": []any{
			map[string]any{"match": "^hello (.*)", "reply": "hi {{1}}"},
		}}}}
	})
	done := &runsDone{}
	gatewaytest.Start(t, s, s.Conn, "gw-send", nil, gateway.Options{Observer: done})
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: humanKey, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	tg := s.Token(bus.Caller{Adapter: "telegram"})
	sub := deliverySub(t, s.Conn)
	msg := func(text string) map[string]any {
		return map[string]any{"sessionKey": humanKey, "channel": "telegram", "from": "42", "text": text, "wait": true}
	}
	must := func(text string) map[string]any {
		t.Helper()
		res, err := inboundRaw(t, s, tg, msg(text))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return res
	}
	next := func() string {
		_, d := nextDelivery(t, sub)
		m, _ := d["message"].(string)
		return m
	}
	if res := must("/send off"); res["reply"] != "Send policy: off (this session's override)." {
		t.Fatalf("/send off: %v", res)
	}
	if got := next(); got != "Send policy: off (this session's override)." {
		t.Fatalf("delivered %q", got)
	}
	if res := must("hello first"); res["status"] != "ok" || res["reply"] != "hi first" {
		t.Fatalf("turn with sends off: %v", res)
	}
	// the reply is delivered (or not) after the run's record: wait for
	// the gateway to be done with the run before the policy changes
	bustest.WaitFor(t, 30*time.Second, "the first run handled", func() bool { return done.n.Load() >= 1 })
	if res := must("/send"); res["reply"] != "Send policy: off (this session's override)." {
		t.Fatalf("/send: %v", res)
	}
	must("/send inherit")
	if res := must("hello second"); res["reply"] != "hi second" {
		t.Fatalf("turn with sends inherited: %v", res)
	}
	var got []string
	for len(got) == 0 || got[len(got)-1] != "hi second" {
		got = append(got, next())
	}
	want := []string{"Send policy: off (this session's override).", "Send policy: inherit (session.sendPolicy: on).", "hi second"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("deliveries %q, want %q (the reply of the turn under /send off must not be delivered)", got, want)
	}
	if _, err := inboundRaw(t, s, tg, msg("/send maybe")); code(err) != bus.CodeBadRequest {
		t.Fatalf("/send maybe: %v", err)
	}
	if res := must("/send it now please"); res["reply"] != nil && strings.HasPrefix(res["reply"].(string), "Send policy") {
		t.Fatalf("an ordinary message read as /send: %v", res)
	}
}
