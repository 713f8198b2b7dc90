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
		return e.SendPolicy()
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
				return e != nil && e.SendPolicy() == step.stored
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

// TestInboundSendCommand: /send off (from an owner) stops the session's
// human turns, as OpenClaw's send policy does: a message is refused with
// OpenClaw's error, queues no run and gets no reply, inline or delivered;
// /send inherit brings them back; /send shows the setting and its answers
// are always delivered.
func TestInboundSendCommand(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script", Script: map[string]any{"rules": []any{
			map[string]any{"match": "^hello (.*)", "reply": "hi {{1}}"},
		}}}}
		c.Commands.OwnerAllowFrom = []string{"telegram:42"}
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
	before := writesOf(t, s)
	delete(before, s.Worker.Deps.Names.DeliverStream())
	if res, err := inboundRaw(t, s, tg, msg("hello first")); code(err) != bus.CodeForbidden || !strings.Contains(err.Error(), rules.SendBlockedError) {
		t.Fatalf("a turn with sends off: %v %v (want 403 %q)", res, err, rules.SendBlockedError)
	}
	after := writesOf(t, s)
	delete(after, s.Worker.Deps.Names.DeliverStream())
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("a refused turn wrote: before %v after %v", before, after)
	}
	if done.n.Load() != 0 {
		t.Fatalf("a refused turn ran: %d runs", done.n.Load())
	}
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
		t.Fatalf("deliveries %q, want %q", got, want)
	}
	if _, err := inboundRaw(t, s, tg, msg("/send maybe")); code(err) != bus.CodeBadRequest {
		t.Fatalf("/send maybe: %v", err)
	}
	if res := must("/send it now please"); res["reply"] != nil && strings.HasPrefix(res["reply"].(string), "Send policy") {
		t.Fatalf("an ordinary message read as /send: %v", res)
	}
}

// TestInboundSendNotOwner: /send is owner-only (commands.ownerAllowFrom):
// a sender not listed, on the right channel or with the right id on
// another channel, is answered OpenClaw's refusal and nothing is written;
// with no owner configured nobody may use it.
func TestInboundSendNotOwner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners []string
		from   string
	}{
		{"another sender", []string{"telegram:42"}, "666"},
		{"the owner's id on another channel", []string{"slack:666"}, "666"},
		{"no owner configured", nil, "666"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := handlerstest.Start(t, func(c *config.Config) { c.Commands.OwnerAllowFrom = tc.owners })
			now := time.Now().UnixMilli()
			s.Put(&sessions.Entry{Key: humanKey, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
			before := writesOf(t, s)
			delete(before, s.Worker.Deps.Names.DeliverStream())
			res, err := inboundRaw(t, s, s.Token(bus.Caller{Adapter: "telegram"}),
				map[string]any{"sessionKey": humanKey, "channel": "telegram", "from": tc.from, "text": "/send off", "wait": true})
			want := "You are not authorized to use this owner-only command. Ask the operator to add `telegram:666` to `commands.ownerAllowFrom`."
			if err != nil || res["reply"] != want {
				t.Fatalf("/send off from a non-owner: %v %v, want %q", res, err, want)
			}
			after := writesOf(t, s)
			delete(after, s.Worker.Deps.Names.DeliverStream())
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("a refused /send wrote: before %v after %v", before, after)
			}
			e, _, err := s.Worker.Deps.Store.Get(bustest.Context(t), humanKey)
			if err != nil || e.SendPolicy() != "" {
				t.Fatalf("send policy after a refused /send: %q %v", e.SendPolicy(), err)
			}
		})
	}
}
