package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
)

// authServer is an embedded server in operator mode trusting a fresh
// deployment with accounts.
func authServer(t *testing.T, accounts ...string) (*embedded.Server, *auth.Deployment) {
	t.Helper()
	d, err := auth.LoadOrCreate(t.TempDir(), accounts...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Auth: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s, d
}

// roleConn is a connection with a role's credentials, over TCP as an
// outside process would connect. It records every error the server sends
// it, so a test can tell a permission refusal from anything else.
type roleConn struct {
	*nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []string
}

func connectRole(t *testing.T, s *embedded.Server, d *auth.Deployment, account string, role auth.Role) *roleConn {
	t.Helper()
	u, err := d.Mint(account, role, string(role)+"-test", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return connectUser(t, s, u, string(role))
}

// connectUser is connectRole for a user minted already (what names it in
// a failure).
func connectUser(t *testing.T, s *embedded.Server, u *auth.User, what string) *roleConn {
	t.Helper()
	rc := &roleConn{}
	opts := append(u.Options(), nats.PermissionErrOnSubscribe(true), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		rc.mu.Lock()
		rc.errs = append(rc.errs, err.Error())
		rc.mu.Unlock()
	}))
	var err error
	rc.Conn, err = nats.Connect(s.URL(), opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", what, err)
	}
	t.Cleanup(rc.Close)
	if rc.js, err = jetstream.New(rc.Conn); err != nil {
		t.Fatal(err)
	}
	return rc
}

// denied waits for the server's permissions violation naming subject.
func (rc *roleConn) denied(t *testing.T, what, subject string) {
	t.Helper()
	bustest.WaitFor(t, 10*time.Second, what+": permissions violation for "+subject, func() bool { return rc.violated(subject) })
}

// violated reports whether the server has refused subject to rc so far.
func (rc *roleConn) violated(subject string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, e := range rc.errs {
		if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, `"`+subject+`"`) {
			return true
		}
	}
	return false
}

// authTenant is one sessionbus deployment in one account: its own
// caller-token key, a worker and a gateway connected with the worker and
// gateway roles, and an admin connection.
type authTenant struct {
	op    *bus.Operator
	admin *roleConn
	w     *handlers.Worker
	names bus.Names
}

func startTenant(t *testing.T, s *embedded.Server, d *auth.Deployment, account string) *authTenant {
	t.Helper()
	cfg := config.Default()
	cfg.Tools.Sessions.Visibility = "agent"
	cfg.Session.AgentToAgent.MaxPingPongTurns = 0
	cfg.Agents.List = []config.Agent{scriptAgent("main", map[string]any{"match": "^ping (.*)", "reply": "pong " + account + " {{1}}"})}
	op := bustest.Operator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := handlers.StartWorker(ctx, connectRole(t, s, d, account, auth.RoleWorker).Conn, cfg, bus.NewVerifier(op.PublicKey()), nil)
	if err != nil {
		t.Fatalf("start worker in %s: %v", account, err)
	}
	t.Cleanup(w.Stop)
	gw, err := gateway.Start(ctx, connectRole(t, s, d, account, auth.RoleGateway).Conn, cfg, op, "gw-"+account, nil)
	if err != nil {
		t.Fatalf("start gateway in %s: %v", account, err)
	}
	t.Cleanup(gw.Stop)
	return &authTenant{op: op, admin: connectRole(t, s, d, account, auth.RoleAdmin), w: w, names: w.Deps.Names}
}

func (a *authTenant) token(t *testing.T, c bus.Caller) string {
	t.Helper()
	tok, err := a.op.Mint(c, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (a *authTenant) call(t *testing.T, nc *nats.Conn, c bus.Caller, tool, params string) (map[string]any, error) {
	t.Helper()
	data, err := bus.Call(bustest.Context(t), nc, a.names, a.token(t, c), tool, []byte(params))
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s reply: %v: %s", tool, err, data)
	}
	return out, nil
}

// seed creates session key with a first turn, sent by the admin as the
// main session.
func (a *authTenant) seed(t *testing.T, key string) {
	t.Helper()
	if res, err := a.call(t, a.admin.Conn, bus.Caller{SessionKey: mainKey}, "sessions_send", `{"sessionKey":"`+key+`","message":"ping 1","timeoutSeconds":30}`); err != nil || res["status"] != "ok" {
		t.Fatalf("send as admin to %s: %v %v", key, res, err)
	}
}

// quickly is a short deadline for a request the server drops: a denied
// publish gets no reply, and the test checks the server's refusal itself
// (roleConn.denied), not the timeout.
func quickly(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// With serve --auth's roles, an agent connection can call tools and get its
// own replies, and nothing else: no stream or bucket, no run queue, no
// JetStream API, nobody's notices, deliveries, tool requests or replies.
func TestAuthAgentRole(t *testing.T) {
	s, d := authServer(t, auth.DefaultAccount)
	sb := startTenant(t, s, d, auth.DefaultAccount)
	other := "agent:main:telegram:group:g1"
	sb.seed(t, other)
	agent := connectRole(t, s, d, auth.DefaultAccount, auth.RoleAgent)

	// allowed: a tool call with its token, and the 401 without one
	list, err := sb.call(t, agent.Conn, bus.Caller{SessionKey: other}, "sessions_list", `{}`)
	if err != nil || list["count"] == nil {
		t.Fatalf("agent sessions_list: %v %v", list, err)
	}
	if _, err := bus.Call(bustest.Context(t), agent.Conn, sb.names, "", "sessions_list", nil); !bustest.IsCode(err, bus.CodeUnauthorized) {
		t.Fatalf("agent call without token: %v", err)
	}

	// no stream, no bucket, no JetStream API at all
	if _, err := agent.js.Stream(quickly(t), sb.names.TranscriptsStream()); err == nil {
		t.Fatal("agent read the transcripts stream's info")
	}
	agent.denied(t, "stream info", "$JS.API.STREAM.INFO."+sb.names.TranscriptsStream())
	if _, err := agent.RequestWithContext(quickly(t), "$JS.API.DIRECT.GET."+sb.names.TranscriptsStream(), []byte(`{"seq":1}`)); err == nil {
		t.Fatal("agent direct-got a transcript entry")
	}
	agent.denied(t, "direct get", "$JS.API.DIRECT.GET."+sb.names.TranscriptsStream())
	buckets := sb.admin.js.KeyValueStoreNames(bustest.Context(t))
	n := 0
	for b := range buckets.Name() {
		n++
		subj := "$JS.API.DIRECT.GET." + bus.KVStream(b) + ".$KV." + b + "." + bus.EncodeKey(other)
		if _, err := agent.RequestWithContext(quickly(t), subj, nil); err == nil {
			t.Fatalf("agent read bucket %s", b)
		}
		agent.denied(t, "bucket "+b, subj)
		if _, err := agent.js.KeyValue(quickly(t), b); err == nil {
			t.Fatalf("agent opened bucket %s", b)
		}
	}
	if n < 3 {
		t.Fatalf("only %d buckets listed: the deployment did not start", n)
	}

	// no run forged into the queue, no stream deleted
	runs, err := sb.admin.js.Stream(bustest.Context(t), sb.names.RunsStream())
	if err != nil {
		t.Fatal(err)
	}
	before, _ := runs.Info(bustest.Context(t))
	if err := agent.Publish(sb.names.Runs("main"), []byte(`{"sessionKey":"`+other+`","message":"forged"}`)); err != nil {
		t.Fatal(err)
	}
	agent.denied(t, "publish a run", sb.names.Runs("main"))
	del := "$JS.API.STREAM.DELETE." + sb.names.TranscriptsStream()
	if _, err := agent.RequestWithContext(quickly(t), del, nil); err == nil {
		t.Fatal("agent got a reply from the stream delete API")
	}
	agent.denied(t, "delete a stream", del)
	after, err := runs.Info(bustest.Context(t))
	if err != nil || after.State.LastSeq != before.State.LastSeq {
		t.Fatalf("run queue changed: %d -> %+v %v", before.State.LastSeq, after, err)
	}
	if _, err := sb.admin.js.Stream(bustest.Context(t), sb.names.TranscriptsStream()); err != nil {
		t.Fatalf("transcripts stream gone: %v", err)
	}

	// no subscription to notices, deliveries, tool requests (tokens) or
	// other connections' replies
	for _, subj := range []string{sb.names.SessionEvent(bus.EncodeKey(other), ">"), sb.names.SessionEvents(), sb.names.Deliver(">"), sb.names.ToolsGroup() + ".>", "_INBOX.>", ">"} {
		sub, err := agent.SubscribeSync(subj)
		if err == nil {
			_, err = sub.NextMsg(5 * time.Second)
		}
		if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("agent subscribed to %s: %v", subj, err)
		}
	}
}

// An adapter brings human turns in and reads deliveries, and cannot call a
// tool; ops reads streams and buckets and cannot change anything.
func TestAuthAdapterAndOpsRoles(t *testing.T) {
	s, d := authServer(t, auth.DefaultAccount)
	sb := startTenant(t, s, d, auth.DefaultAccount)
	sb.seed(t, "agent:main:telegram:group:g2")
	adapter := connectRole(t, s, d, auth.DefaultAccount, auth.RoleAdapter)
	deliveries, err := adapter.SubscribeSync(sb.names.Deliver(">"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"sessionKey":"agent:main:telegram:group:g2","channel":"telegram","from":"u1","text":"ping 2","timeoutSeconds":30}`
	out, err := bus.Inbound(bustest.Context(t), adapter.Conn, sb.names, sb.token(t, bus.Caller{Adapter: "telegram"}), []byte(body))
	if err != nil || !strings.Contains(string(out), "pong SB 2") {
		t.Fatalf("adapter inbound: %s %v", out, err)
	}
	if _, err := deliveries.NextMsg(30 * time.Second); err != nil {
		t.Fatalf("adapter got no delivery: %v", err)
	}
	tool := sb.names.Tool("sessions_list")
	if _, err := bus.Call(quickly(t), adapter.Conn, sb.names, sb.token(t, bus.Caller{SessionKey: mainKey}), "sessions_list", nil); err == nil {
		t.Fatal("adapter called a tool")
	}
	adapter.denied(t, "tool call", tool)

	ops := connectRole(t, s, d, auth.DefaultAccount, auth.RoleOps)
	opsJS, err := jetstream.NewWithAPIPrefix(ops.Conn, sb.names.OpsJSAPI())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := opsJS.Stream(bustest.Context(t), sb.names.TranscriptsStream())
	if err != nil {
		t.Fatalf("ops stream info: %v", err)
	}
	if info, err := tr.Info(bustest.Context(t)); err != nil || info.State.Msgs == 0 {
		t.Fatalf("ops sees no transcript: %+v %v", info, err)
	}
	kv, err := opsJS.KeyValue(bustest.Context(t), sb.names.SessionsBucket())
	if err != nil {
		t.Fatalf("ops opens sessions: %v", err)
	}
	if _, err := kv.Get(bustest.Context(t), bus.EncodeKey("agent:main:telegram:group:g2")); err != nil {
		t.Fatalf("ops reads a session: %v", err)
	}
	if _, err := ops.RequestWithContext(quickly(t), "$KV."+sb.names.SessionsBucket()+".x", []byte("{}")); err == nil {
		t.Fatal("ops wrote a session entry")
	}
	ops.denied(t, "kv put", "$KV."+sb.names.SessionsBucket()+".x")
	for _, api := range []string{"STREAM.PURGE.", "STREAM.DELETE.", "STREAM.UPDATE."} {
		subj := "$JS.API." + api + sb.names.TranscriptsStream()
		if _, err := ops.RequestWithContext(quickly(t), subj, []byte(`{}`)); err == nil {
			t.Fatalf("ops got a reply from %s", subj)
		}
		ops.denied(t, api, subj)
		// the ops API refuses it with an answer
		subj = sb.names.OpsJSAPI() + "." + api + sb.names.TranscriptsStream()
		if res, err := ops.RequestWithContext(bustest.Context(t), subj, []byte(`{}`)); err != nil || !strings.Contains(string(res.Data), "may only read") {
			t.Fatalf("ops %s: %v %s", subj, err, resData(res))
		}
	}
	if _, err := bus.Call(quickly(t), ops.Conn, sb.names, sb.token(t, bus.Caller{SessionKey: mainKey}), "sessions_send", []byte(`{"sessionKey":"x","message":"m"}`)); err == nil {
		t.Fatal("ops called a tool")
	}
	ops.denied(t, "tool call", sb.names.Tool("sessions_send"))
	if info, err := tr.Info(bustest.Context(t)); err != nil || info.State.Msgs == 0 {
		t.Fatalf("transcripts after ops: %+v %v", info, err)
	}
}

// Two accounts on one server, each with its own deployment: neither can
// list, read, send into or subscribe to the other.
func TestAuthTenantsAreIsolated(t *testing.T) {
	s, d := authServer(t, "A", "B")
	a := startTenant(t, s, d, "A")
	b := startTenant(t, s, d, "B")
	// A watches everything it may see before B does anything
	seen, err := a.admin.SubscribeSync("sb.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.admin.Flush(); err != nil {
		t.Fatal(err)
	}
	secret := "agent:main:telegram:group:secretB"
	res, err := b.call(t, b.admin.Conn, bus.Caller{SessionKey: mainKey}, "sessions_send", `{"sessionKey":"`+secret+`","message":"ping B-only","timeoutSeconds":30}`)
	if err != nil || res["reply"] != "pong B B-only" {
		t.Fatalf("send in B: %v %v", res, err)
	}

	// list: A's tools and A's streams know nothing of B's session
	list, err := a.call(t, a.admin.Conn, bus.Caller{SessionKey: mainKey}, "sessions_list", `{}`)
	if err != nil || strings.Contains(mustJSON(list), "secretB") {
		t.Fatalf("A lists B's session: %v %v", list, err)
	}
	kv, err := a.admin.js.KeyValue(bustest.Context(t), a.names.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(bustest.Context(t), bus.EncodeKey(secret)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("A's bucket has B's session: %v", err)
	}
	// read: history through A's tools finds nothing, A's transcripts hold nothing of it
	if h, err := a.call(t, a.admin.Conn, bus.Caller{SessionKey: mainKey}, "sessions_history", `{"sessionKey":"`+secret+`"}`); err == nil && strings.Contains(mustJSON(h), "B-only") {
		t.Fatalf("A reads B's history: %v", h)
	}
	tr, err := a.admin.js.Stream(bustest.Context(t), a.names.TranscriptsStream())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.GetLastMsgForSubject(bustest.Context(t), a.names.Transcript(bus.EncodeKey(secret))); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("A's transcripts hold B's session: %v", err)
	}
	// send into: B's token on A's bus reaches A's worker, which does not trust it
	_, err = bus.Call(bustest.Context(t), a.admin.Conn, a.names, b.token(t, bus.Caller{SessionKey: mainKey}), "sessions_send", []byte(`{"sessionKey":"`+secret+`","message":"ping from A","timeoutSeconds":0}`))
	if !bustest.IsCode(err, bus.CodeUnauthorized) {
		t.Fatalf("B's token in A: %v", err)
	}
	if h, err := b.call(t, b.admin.Conn, bus.Caller{SessionKey: mainKey}, "sessions_history", `{"sessionKey":"`+secret+`"}`); err != nil || strings.Contains(mustJSON(h), "from A") {
		t.Fatalf("B's session after A's try: %v %v", h, err)
	}
	// subscribe: A saw none of B's traffic. A marker published in A after
	// B's turn ended arrives after anything of B's that could have.
	if err := a.admin.Publish("sb.marker", []byte("end")); err != nil {
		t.Fatal(err)
	}
	sawOwn := false
	for {
		m, err := seen.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("A's marker never came back: %v", err)
		}
		// (A's own history request above names the key; only B's turn says B-only)
		if strings.Contains(string(m.Data), "B-only") || strings.Contains(string(m.Data), "pong B") {
			t.Fatalf("A saw B's traffic on %s: %.200s", m.Subject, m.Data)
		}
		sawOwn = sawOwn || m.Subject == a.names.Tool("sessions_history")
		if m.Subject == "sb.marker" {
			break
		}
	}
	if !sawOwn {
		t.Fatal("A's subscription did not see A's own traffic: it proves nothing about B's")
	}
}
