package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// A caller chooses its request's reply subject, and the worker that answers
// may write anywhere in the deployment. With only agent (or ops)
// credentials, a request whose reply subject named a bucket key or a
// delivery subject made the worker overwrite a session entry, lock a lane
// and forge a delivery. Now each such request is dropped unanswered and
// counted, and the victim's entry, lane and the delivery stream are as
// they were.
func TestAuthReplyRedirectionRefused(t *testing.T) {
	s, d := authServer(t, auth.DefaultAccount)
	sb := startTenant(t, s, d, auth.DefaultAccount)
	victim := "agent:main:telegram:group:victim"
	sb.seed(t, victim)
	ctx := bustest.Context(t)
	key := bus.EncodeKey(victim)
	sessions, err := sb.admin.js.KeyValue(ctx, sb.names.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	subKV, err := sb.admin.js.KeyValue(ctx, sb.names.SubagentsBucket())
	if err != nil {
		t.Fatal(err)
	}
	agent := connectRole(t, s, d, auth.DefaultAccount, auth.RoleAgent)
	ops := connectRole(t, s, d, auth.DefaultAccount, auth.RoleOps)
	tok := sb.token(t, bus.Caller{SessionKey: victim})
	forged := []struct {
		nc            *nats.Conn
		subject, repl string
	}{
		{agent.Conn, sb.names.Tool("sessions_list"), "$KV." + sb.names.SessionsBucket() + "." + key},
		{agent.Conn, sb.names.Tool("session_status"), "$KV." + sb.names.SubagentsBucket() + "." + key},
		{agent.Conn, sb.names.Tool("sessions_list"), sb.names.Deliver("telegram")},
		{agent.Conn, sb.names.Schema(), "$KV." + sb.names.SessionsBucket() + "." + key},
		{ops.Conn, "$SRV.PING", "$KV." + sb.names.SessionsBucket() + "." + key},
	}
	for _, f := range forged {
		m := &nats.Msg{Subject: f.subject, Reply: f.repl, Data: []byte(`{}`), Header: nats.Header{bus.HeaderToken: []string{tok}}}
		if err := f.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	bustest.WaitFor(t, 10*time.Second, "the worker to refuse every forged reply", func() bool {
		return sb.w.RefusedReplies() == int64(len(forged))
	})
	// a real call still works and is answered after the forged ones
	if list, err := sb.call(t, agent.Conn, bus.Caller{SessionKey: victim}, "sessions_list", `{}`); err != nil || list["count"] == nil {
		t.Fatalf("agent sessions_list: %v %v", list, err)
	}

	// The victim's own run may still touch its entry after the send
	// returned, so each value the key ever held is checked to be what the
	// deployment writes there: a session entry.
	hist, err := sessions.History(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist {
		var v map[string]any
		if err := json.Unmarshal(e.Value(), &v); err != nil || v["key"] != victim {
			t.Fatalf("victim entry revision %d is not its session entry: %.200s", e.Revision(), e.Value())
		}
	}
	// the victim is no sub-agent: no reply may have written a registry record
	if _, err := subKV.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a forged reply wrote the subagents bucket at the victim's key: %v", err)
	}
	for _, m := range readStream(t, sb.admin.js, sb.names.DeliverStream()) {
		if bytes.Contains(m, []byte(`"sessions":`)) || bytes.Contains(m, []byte(`"code":`)) {
			t.Fatalf("a tool reply was published as a delivery: %.200s", m)
		}
	}
}

// Agent and adapter credentials carry a payload cap: a client that sends a
// larger message is disconnected by the server with a payload violation,
// and no worker reads it. Requests within the cap still work.
func TestAuthClientPayloadCap(t *testing.T) {
	s, d := authServer(t, auth.DefaultAccount)
	sb := startTenant(t, s, d, auth.DefaultAccount)
	for _, role := range []auth.Role{auth.RoleAgent, auth.RoleAdapter} {
		rc := connectRole(t, s, d, auth.DefaultAccount, role)
		cid, err := rc.GetClientID()
		if err != nil {
			t.Fatal(err)
		}
		subj := sb.names.Tool("sessions_list")
		if role == auth.RoleAdapter {
			subj = sb.names.Inbound()
		}
		// once the server's INFO told nats.go the cap, nats.go refuses the
		// message itself; before that it sends it, and what it sees then
		// depends on timing (the server's -ERR, or a reset while it
		// still writes the body), but the server's record of why it
		// closed the connection does not
		if err := rc.Publish(subj, make([]byte, 2*bus.MaxRequestBytes)); errors.Is(err, nats.ErrMaxPayload) {
			continue // the server's INFO told nats.go the cap: nothing was sent
		}
		var reason string
		bustest.WaitFor(t, 10*time.Second, fmt.Sprintf("the server to close %s's connection for its %d-byte message", role, 2*bus.MaxRequestBytes), func() bool {
			cz, err := s.NS.Connz(&server.ConnzOptions{CID: cid, State: server.ConnClosed})
			if err != nil || len(cz.Conns) == 0 {
				return false
			}
			reason = cz.Conns[0].Reason
			return true
		})
		if reason != server.MaxPayloadExceeded.String() {
			t.Fatalf("%s: connection closed for %q, want %q", role, reason, server.MaxPayloadExceeded)
		}
	}
	// within the cap: a body just over 1 MiB reaches the worker, which
	// answers 413, and a normal call works
	agent := connectRole(t, s, d, auth.DefaultAccount, auth.RoleAgent)
	tok := sb.token(t, bus.Caller{SessionKey: mainKey})
	if _, err := bus.Call(bustest.Context(t), agent.Conn, sb.names, tok, "sessions_list", make([]byte, bus.MaxRequestBytes+1)); !bustest.IsCode(err, bus.CodeTooLarge) {
		t.Fatalf("a body just over 1 MiB: %v, want the worker's 413", err)
	}
	if list, err := sb.call(t, agent.Conn, bus.Caller{SessionKey: mainKey}, "sessions_list", `{}`); err != nil || list["count"] == nil {
		t.Fatalf("agent sessions_list: %v %v", list, err)
	}
}

// The read-only ops role reaches no consumer of the deployment's: editing
// the gateways' durable (a new filter stopped every turn) and pulling from
// it without an ack (a run held back for the ack wait) are refused, by the
// server on $JS.API and by the workers on the ops API, while ops still
// reads the run queue with a consumer of its own.
func TestAuthOpsCannotTouchTheGatewaysConsumer(t *testing.T) {
	s, d := authServer(t, auth.DefaultAccount)
	sb := startTenant(t, s, d, auth.DefaultAccount)
	sb.seed(t, "agent:main:telegram:group:g3")
	ops := connectRole(t, s, d, auth.DefaultAccount, auth.RoleOps)
	runs, gw := sb.names.RunsStream(), sb.names.GatewaysConsumer()
	edit := `{"stream_name":"` + runs + `","action":"update","config":{"durable_name":"` + gw + `","ack_policy":"explicit","filter_subject":"sb.runs.nobody"}}`
	for _, req := range []struct{ subject, body string }{
		{"$JS.API.CONSUMER.CREATE." + runs + "." + gw, edit},
		{"$JS.API.CONSUMER.CREATE." + runs + "." + gw + ".sb.runs.nobody", edit},
		{"$JS.API.CONSUMER.DURABLE.CREATE." + runs + "." + gw, edit},
		{"$JS.API.CONSUMER.MSG.NEXT." + runs + "." + gw, `{"batch":1,"no_wait":true}`},
	} {
		if _, err := ops.RequestWithContext(quickly(t), req.subject, []byte(req.body)); err == nil {
			t.Fatalf("ops got a reply from %s", req.subject)
		}
		ops.denied(t, "ops "+req.subject, req.subject)
	}
	api := sb.names.OpsJSAPI()
	for _, req := range []struct{ subject, body string }{
		{api + ".CONSUMER.CREATE." + runs + "." + gw, edit},
		{api + ".CONSUMER.CREATE." + runs + "." + gw + ".sb.runs.nobody", edit},
		{api + ".CONSUMER.CREATE." + runs, strings.Replace(edit, `"durable_name"`, `"name"`, 1)},
		{api + ".CONSUMER.MSG.NEXT." + runs + "." + gw, `{"batch":1,"no_wait":true}`},
	} {
		res, err := ops.RequestWithContext(bustest.Context(t), req.subject, []byte(req.body))
		if err != nil || !bytes.Contains(res.Data, []byte(`"code":`)) {
			t.Fatalf("ops %s: %v %s, want a refusal", req.subject, err, resData(res))
		}
	}
	ci, err := sb.admin.js.Consumer(bustest.Context(t), runs, gw)
	if err != nil {
		t.Fatal(err)
	}
	if f := ci.CachedInfo().Config.FilterSubject; f == "sb.runs.nobody" {
		t.Fatalf("the gateways' consumer was edited: filter %q", f)
	}
	// its own reads still work: an ordered consumer over the run queue
	opsJS, err := jetstream.NewWithAPIPrefix(ops.Conn, api)
	if err != nil {
		t.Fatal(err)
	}
	st, err := opsJS.Stream(bustest.Context(t), runs)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := st.OrderedConsumer(bustest.Context(t), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ops ordered consumer on %s: %v", runs, err)
	}
	if _, err := oc.Next(jetstream.FetchMaxWait(10 * time.Second)); err != nil && st.CachedInfo().State.Msgs > 0 {
		t.Fatalf("ops read %s: %v", runs, err)
	}
}

func resData(m *nats.Msg) []byte {
	if m == nil {
		return nil
	}
	return m.Data
}

// An adapter minted for one channel reads that channel's deliveries through
// the consumer named for it and reaches nothing of another channel's: it
// cannot delete or create another channel's consumer (one adapter deleted
// another channel's durable), filter its own on another channel, or
// subscribe to another channel's deliveries.
func TestAuthAdapterScopedToItsChannel(t *testing.T) {
	s, d := authServer(t, auth.DefaultAccount)
	sb := startTenant(t, s, d, auth.DefaultAccount)
	u, err := d.MintAdapter(auth.DefaultAccount, "telegram", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	tg := connectUser(t, s, u, "the telegram adapter")
	sb.seed(t, "agent:main:telegram:group:g4")
	ctx := bustest.Context(t)
	ds := sb.names.DeliverStream()
	if _, err := sb.admin.js.CreateConsumer(ctx, ds, jetstream.ConsumerConfig{Durable: "slack", FilterSubject: sb.names.Deliver("slack"), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}

	// its own: the consumer named for the channel, and a human turn in
	if _, err := tg.js.CreateOrUpdateConsumer(ctx, ds, jetstream.ConsumerConfig{Durable: "telegram", FilterSubject: sb.names.Deliver("telegram"), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatalf("telegram adapter creates its consumer: %v", err)
	}
	body := `{"sessionKey":"agent:main:telegram:group:g4","channel":"telegram","from":"u1","text":"ping 4","timeoutSeconds":30}`
	if out, err := bus.Inbound(ctx, tg.Conn, sb.names, sb.token(t, bus.Caller{Adapter: "telegram"}), []byte(body)); err != nil || !strings.Contains(string(out), "pong SB 4") {
		t.Fatalf("telegram adapter inbound: %s %v", out, err)
	}
	c, err := tg.js.Consumer(ctx, ds, "telegram")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(jetstream.FetchMaxWait(30 * time.Second)); err != nil {
		t.Fatalf("telegram adapter reads its delivery: %v", err)
	}

	// another channel's: refused by the server
	for _, subj := range []string{
		"$JS.API.CONSUMER.DELETE." + ds + ".slack",
		"$JS.API.CONSUMER.CREATE." + ds + ".slack." + sb.names.Deliver("slack"),
		"$JS.API.CONSUMER.CREATE." + ds + ".telegram." + sb.names.Deliver("slack"),
		"$JS.API.CONSUMER.CREATE." + ds,
		"$JS.API.CONSUMER.MSG.NEXT." + ds + ".slack",
	} {
		if _, err := tg.RequestWithContext(quickly(t), subj, []byte(`{}`)); err == nil {
			t.Fatalf("telegram adapter got a reply from %s", subj)
		}
		tg.denied(t, "telegram adapter "+subj, subj)
	}
	sub, err := tg.SubscribeSync(sb.names.Deliver("slack"))
	if err == nil {
		_, err = sub.NextMsg(5 * time.Second)
	}
	if !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("telegram adapter subscribed to slack's deliveries: %v", err)
	}
	if _, err := sb.admin.js.Consumer(ctx, ds, "slack"); err != nil {
		t.Fatalf("slack's consumer is gone: %v", err)
	}
}
