package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts/transcriptstest"
)

const humanKey = "agent:main:telegram:dm:42"

// inboundStack is a worker and a real gateway on one server, agent main on
// the script runtime, the session humanKey present, and every human turn
// the ingress reports kept.
type inboundStack struct {
	*handlerstest.Stack
	gw *gateway.Gateway

	mu    sync.Mutex
	turns []handlers.HumanTurn
}

func startInbound(t *testing.T) *inboundStack {
	t.Helper()
	is := &inboundStack{}
	hook := handlers.WithHumanTurnHook(func(_ context.Context, h handlers.HumanTurn) error {
		is.mu.Lock()
		defer is.mu.Unlock()
		is.turns = append(is.turns, h)
		return nil
	})
	is.Stack = handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script", Script: map[string]any{"rules": []any{
			map[string]any{"match": "^hello (.*)", "reply": "hi {{1}}"},
			map[string]any{"match": "^quiet", "reply": "NO_REPLY"},
			map[string]any{"match": "^fail", "error": "scripted failure"},
		}}}}
	}, hook)
	is.gw = gatewaytest.Start(t, is.Stack, is.Conn, "gw-inbound", nil, gateway.Options{})
	now := time.Now().UnixMilli()
	is.Put(&sessions.Entry{Key: humanKey, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now, SpawnedBy: "agent:main:main"})
	return is
}

func (is *inboundStack) humanTurns() []handlers.HumanTurn {
	is.mu.Lock()
	defer is.mu.Unlock()
	return append([]handlers.HumanTurn(nil), is.turns...)
}

func (is *inboundStack) adapterToken(channel string) string {
	return is.Token(bus.Caller{Adapter: channel})
}

// inbound sends one ingress request; a refusal is returned as *bus.Error.
func (is *inboundStack) inbound(token, body string) (map[string]any, error) {
	is.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := bus.Inbound(ctx, is.Conn, is.Worker.Deps.Names, token, []byte(body))
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		is.T.Fatalf("inbound reply is not a JSON object: %v: %s", err, data)
	}
	return out, nil
}

func (is *inboundStack) mustInbound(token, body string) map[string]any {
	is.T.Helper()
	out, err := is.inbound(token, body)
	if err != nil {
		is.T.Fatalf("inbound %s: %v", body, err)
	}
	return out
}

// transcript is the session's transcript entries, decoded.
func (is *inboundStack) transcript(key string) []map[string]any {
	is.T.Helper()
	return transcriptstest.Transcript[map[string]any](is.T, is.Worker.Deps.Transcripts, key, 100)
}

// writes is the last sequence of every stream (KV buckets included): a
// request that leaves it unchanged wrote nothing anywhere.
func (is *inboundStack) writes() map[string]uint64 {
	is.T.Helper()
	return writesOf(is.T, is.Stack)
}

// writesOf is writes of any stack.
func writesOf(t testing.TB, s *handlerstest.Stack) map[string]uint64 {
	t.Helper()
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	l := js.ListStreams(bustest.Context(t))
	for info := range l.Info() {
		// the gateways' maintenance lease is taken and renewed there on the
		// sweep's own clock, whatever messages arrive
		if info.Config.Name != "KV_claims" {
			out[info.Config.Name] = info.State.LastSeq
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func deliverySub(t *testing.T, nc *nats.Conn) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync("sb.deliver.>")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sub
}

func nextDelivery(t *testing.T, sub *nats.Subscription) (string, map[string]any) {
	t.Helper()
	msg, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no delivery: %v", err)
	}
	var d map[string]any
	if err := json.Unmarshal(msg.Data, &d); err != nil {
		t.Fatal(err)
	}
	return msg.Subject, d
}

// TestInboundTurn: a human turn appends with external_user provenance,
// records the route on the session, runs, and its reply is published to
// sb.deliver.<channel> for that route; the hook hears of it once.
func TestInboundTurn(t *testing.T) {
	is := startInbound(t)
	sub := deliverySub(t, is.Conn)
	tok := is.adapterToken("telegram")
	res := is.mustInbound(tok, `{"sessionKey":"`+humanKey+`","channel":"Telegram","from":"user42","text":"hello bob","accountId":"acct1","threadId":"7","wait":true}`)
	if res["status"] != "ok" || res["reply"] != "hi bob" || res["sessionKey"] != humanKey || res["runId"] == "" {
		t.Fatalf("reply: %v", res)
	}
	subj, d := nextDelivery(t, sub)
	want := map[string]any{"channel": "telegram", "to": "user42", "accountId": "acct1", "threadId": "7", "message": "hi bob", "sessionKey": humanKey, "runId": res["runId"]}
	if subj != "sb.deliver.telegram" || !maps.Equal(d, want) {
		t.Fatalf("delivery on %s: %v, want %v", subj, d, want)
	}

	tr := is.transcript(humanKey)
	if len(tr) != 2 {
		t.Fatalf("transcript has %d entries, want 2: %v", len(tr), tr)
	}
	prov, _ := tr[0]["provenance"].(map[string]any)
	if tr[0]["role"] != "user" || tr[0]["content"] != "hello bob" || prov["kind"] != "external_user" || prov["sourceChannel"] != "telegram" {
		t.Fatalf("user entry: %v", tr[0])
	}
	if tr[1]["role"] != "assistant" || tr[1]["content"] != "hi bob" {
		t.Fatalf("reply entry: %v", tr[1])
	}

	e, _, err := is.Worker.Deps.Store.Get(bustest.Context(t), humanKey)
	if err != nil {
		t.Fatal(err)
	}
	dc := sessions.DeliveryContext{Channel: "telegram", To: "user42", AccountID: "acct1", ThreadID: "7"}
	if e.LastChannel != "telegram" || e.LastTo != "user42" || e.LastAccountID != "acct1" || e.LastThreadID() != "7" || e.DeliveryContext == nil || *e.DeliveryContext != dc {
		t.Fatalf("route not recorded: %+v", e)
	}

	turns := is.humanTurns()
	if len(turns) != 1 {
		t.Fatalf("hook heard %d turns, want 1", len(turns))
	}
	h := turns[0]
	if h.SessionKey != humanKey || h.AgentID != "main" || h.SessionID != e.SessionID || h.SpawnedBy != "agent:main:main" ||
		h.Channel != "telegram" || h.From != "user42" || h.RunID != res["runId"] || h.DedupeKey != "human-message:"+h.RunID || h.OccurredAt == 0 {
		t.Fatalf("hook got %+v", h)
	}

	// Without wait: accepted at once, the reply still reaches the channel,
	// and a message from another sender moves the route (no thread now).
	res = is.mustInbound(tok, `{"sessionKey":"`+humanKey+`","channel":"telegram","from":"user43","text":"hello ann"}`)
	if res["status"] != "accepted" || res["runId"] == "" || res["sessionKey"] != humanKey || res["reply"] != nil {
		t.Fatalf("accepted reply: %v", res)
	}
	subj, d = nextDelivery(t, sub)
	if subj != "sb.deliver.telegram" || d["message"] != "hi ann" || d["to"] != "user43" || d["threadId"] != nil || d["runId"] != res["runId"] {
		t.Fatalf("delivery on %s: %v", subj, d)
	}
	if e, _, _ := is.Worker.Deps.Store.Get(bustest.Context(t), humanKey); e.LastTo != "user43" || e.LastThreadID() != "" || e.DeliveryContext.To != "user43" {
		t.Fatalf("route not moved: %+v", e)
	}
}

// TestInboundNoDelivery: a silent reply (NO_REPLY) and a failed run publish
// nothing to the channel; the waiting adapter learns the outcome.
func TestInboundNoDelivery(t *testing.T) {
	is := startInbound(t)
	sub := deliverySub(t, is.Conn)
	tok := is.adapterToken("*")
	res := is.mustInbound(tok, `{"sessionKey":"`+humanKey+`","channel":"slack","from":"u1","text":"quiet please","timeoutSeconds":30}`)
	if res["status"] != "ok" || res["reply"] != "NO_REPLY" {
		t.Fatalf("silent: %v", res)
	}
	res = is.mustInbound(tok, `{"sessionKey":"`+humanKey+`","channel":"slack","from":"u1","text":"fail now","timeoutSeconds":30}`)
	if res["status"] != "error" || !strings.Contains(fmt.Sprint(res["error"]), "scripted failure") {
		t.Fatalf("failed run: %v", res)
	}
	// a third turn that does reply is the first delivery
	res = is.mustInbound(tok, `{"sessionKey":"`+humanKey+`","channel":"slack","from":"u1","text":"hello you","timeoutSeconds":30}`)
	if _, d := nextDelivery(t, sub); d["message"] != "hi you" || d["runId"] != res["runId"] {
		t.Fatalf("first delivery is %v, want the third turn's", d)
	}
}

// TestInboundIdempotent: a retried message (same idempotency key) never
// runs twice: same run id, one turn in the transcript, one delivery, one
// hook call.
func TestInboundIdempotent(t *testing.T) {
	is := startInbound(t)
	sub := deliverySub(t, is.Conn)
	tok := is.adapterToken("telegram")
	body := `{"sessionKey":"` + humanKey + `","channel":"telegram","from":"user42","text":"hello once","idempotencyKey":"tg-update-1001","wait":true}`
	first := is.mustInbound(tok, body)
	if first["status"] != "ok" || first["reply"] != "hi once" || first["repeat"] != nil {
		t.Fatalf("first: %v", first)
	}
	again := is.mustInbound(tok, body)
	if again["runId"] != first["runId"] || again["status"] != "ok" || again["reply"] != "hi once" || again["repeat"] != true {
		t.Fatalf("repeat: %v vs %v", again, first)
	}
	// a retry that does not wait is answered accepted, with the same run
	if third := is.mustInbound(tok, strings.Replace(body, `"wait":true`, `"wait":false`, 1)); third["runId"] != first["runId"] || third["status"] != "accepted" {
		t.Fatalf("third: %v", third)
	}
	rec, _, err := is.gw.Runs().Get(bustest.Context(t), first["runId"].(string))
	if err != nil || rec.Attempts != 1 {
		t.Fatalf("run record: %+v %v", rec, err)
	}
	if tr := is.transcript(humanKey); len(tr) != 2 {
		t.Fatalf("transcript has %d entries, want 2 (one turn)", len(tr))
	}
	if _, d := nextDelivery(t, sub); d["runId"] != first["runId"] {
		t.Fatalf("delivery: %v", d)
	}
	js, _ := jetstream.New(is.Conn)
	st, err := js.Stream(bustest.Context(t), "SB_DELIVER")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(bustest.Context(t)); err != nil || info.State.Msgs != 1 {
		t.Fatalf("SB_DELIVER holds %+v (%v), want 1 message", info.State, err)
	}
	if n := len(is.humanTurns()); n != 1 {
		t.Fatalf("hook heard %d turns, want 1", n)
	}
}

// TestInboundRefusals: every refused message says why, with its code, and
// writes nothing: no stream or bucket moves, the hook hears nothing.
func TestInboundRefusals(t *testing.T) {
	is := startInbound(t)
	tg := is.adapterToken("telegram")
	agent := is.Token(bus.Caller{SessionKey: "agent:main:main"})
	ok := func(over map[string]any) string {
		m := map[string]any{"sessionKey": humanKey, "channel": "telegram", "from": "user42", "text": "hello"}
		for k, v := range over {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct {
		name, token, body string
		code              int
		msg               string
	}{
		{"unknown session", tg, ok(map[string]any{"sessionKey": "agent:main:telegram:dm:nobody"}), 404, "unknown session agent:main:telegram:dm:nobody"},
		{"missing channel", tg, ok(map[string]any{"channel": nil}), 400, "channel required"},
		{"missing from", tg, ok(map[string]any{"from": nil}), 400, "from required"},
		{"missing text", tg, ok(map[string]any{"text": nil}), 400, "text required"},
		{"blank text", tg, ok(map[string]any{"text": "  \n "}), 400, "text required"},
		{"oversized text", tg, ok(map[string]any{"text": strings.Repeat("x", handlers.InboundMaxTextBytes+1)}), 413, "at most 65536 bytes"},
		{"bad key", tg, ok(map[string]any{"sessionKey": "../../etc"}), 400, `sessionKey "../../etc" is invalid: it has a ".." segment`},
		{"huge key", tg, ok(map[string]any{"sessionKey": strings.Repeat("k", 10_000)}), 400, "is invalid: it is 10000 bytes long"},
		{"bad channel", tg, ok(map[string]any{"channel": "tele.gram"}), 400, "is not a channel id"},
		{"control char in from", tg, ok(map[string]any{"from": "a\x00b"}), 400, "from contains a control character"},
		{"text not a string", tg, ok(map[string]any{"text": 5}), 400, "text must be a string"},
		{"not JSON", tg, `{"sessionKey":`, 400, "invalid JSON"},
		{"agent token", agent, ok(nil), 403, "takes a channel adapter's token, and this one is session agent:main:main's"},
		{"adapter of another channel", is.adapterToken("slack"), ok(nil), 403, `this adapter token is for channel "slack", not "telegram"`},
		{"no token", "", ok(nil), 401, "missing Sessionbus-Token header"},
	}
	before := is.writes()
	entry, rev, err := is.Worker.Deps.Store.Get(bustest.Context(t), humanKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := is.inbound(c.token, c.body)
			e, isErr := bus.AsError(err)
			if !isErr || e.Code != c.code || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("got %v, want code %d with %q", err, c.code, c.msg)
			}
			if after := is.writes(); !maps.Equal(after, before) {
				t.Fatalf("a refused message wrote: streams were %v, now %v", before, after)
			}
		})
	}
	if e2, rev2, err := is.Worker.Deps.Store.Get(bustest.Context(t), humanKey); err != nil || rev2 != rev || e2.LastChannel != entry.LastChannel {
		t.Fatalf("session entry changed: rev %d -> %d (%v)", rev, rev2, err)
	}
	if tr := is.transcript(humanKey); len(tr) != 0 {
		t.Fatalf("transcript has %d entries after refusals", len(tr))
	}
	if n := len(is.humanTurns()); n != 0 {
		t.Fatalf("hook heard %d turns from refused messages", n)
	}
	// the check sees writes: an accepted message moves the streams
	if res := is.mustInbound(tg, ok(nil)); res["status"] != "accepted" {
		t.Fatalf("accepted: %v", res)
	}
	if after := is.writes(); maps.Equal(after, before) {
		t.Fatal("an accepted message left every stream as it was")
	}
}

// TestAdapterTokenCallsNoTool: an adapter speaks for no session, so the
// tools refuse its token.
func TestAdapterTokenCallsNoTool(t *testing.T) {
	s := handlerstest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := bus.Call(ctx, s.Conn, s.Worker.Deps.Names, s.Token(bus.Caller{Adapter: "*"}), "sessions_list", []byte(`{}`))
	if e, ok := bus.AsError(err); !ok || e.Code != 403 || !strings.Contains(e.Message, `channel adapter "*"'s token`) {
		t.Fatalf("got %v, want 403", err)
	}
}
