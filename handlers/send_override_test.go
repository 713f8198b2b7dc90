package handlers_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
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

// TestInboundSendCommand: /send off stops the turn replies of the session
// from being delivered to its channel (the run still runs and answers the
// waiting adapter); /send on brings them back; /send shows the setting and
// its answers are always delivered.
func TestInboundSendCommand(t *testing.T) {
	is := startInbound(t)
	tg := is.adapterToken("telegram")
	sub := deliverySub(t, is.Conn)
	msg := func(text string) string {
		b, _ := json.Marshal(map[string]any{"sessionKey": humanKey, "channel": "telegram", "from": "42", "text": text, "wait": true})
		return string(b)
	}
	next := func() string {
		_, d := nextDelivery(t, sub)
		s, _ := d["message"].(string)
		return s
	}
	if res := is.mustInbound(tg, msg("/send off")); res["reply"] != "Send policy: off (this session's override)." {
		t.Fatalf("/send off: %v", res)
	}
	if got := next(); got != "Send policy: off (this session's override)." {
		t.Fatalf("delivered %q", got)
	}
	if res := is.mustInbound(tg, msg("hello first")); res["status"] != "ok" || res["reply"] != "hi first" {
		t.Fatalf("turn with sends off: %v", res)
	}
	if res := is.mustInbound(tg, msg("/send")); res["reply"] != "Send policy: off (this session's override)." {
		t.Fatalf("/send: %v", res)
	}
	is.mustInbound(tg, msg("/send inherit"))
	if res := is.mustInbound(tg, msg("hello second")); res["reply"] != "hi second" {
		t.Fatalf("turn with sends inherited: %v", res)
	}
	var got []string
	for len(got) == 0 || got[len(got)-1] != "hi second" {
		got = append(got, next())
	}
	if want := []string{"Send policy: off (this session's override).", "Send policy: inherit (session.sendPolicy: on).", "hi second"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("deliveries %q, want %q (the reply of the turn under /send off must not be delivered)", got, want)
	}
	if _, err := is.inbound(tg, msg("/send maybe")); code(err) != bus.CodeBadRequest {
		t.Fatalf("/send maybe: %v", err)
	}
	if res := is.mustInbound(tg, msg("/send it now please")); res["reply"] != nil && strings.HasPrefix(res["reply"].(string), "Send policy") {
		t.Fatalf("an ordinary message read as /send: %v", res)
	}
}
