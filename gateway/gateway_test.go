package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/config/configtest"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/kv/a2a"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/deliveries"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
	"github.com/sessionbus/sessionbus/streams/transcripts/transcriptstest"
)

const testConfig = `
session:
  agentToAgent:
    maxPingPongTurns: 2
agents:
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: "^fail"
            error: "scripted failure"
          - match: "^slow"
            delayMs: 5000
            reply: "too late"
          - match: "^wait"
            delayMs: 150
            reply: "waited"
          - match: "^tool"
            tool:
              name: sessions_list
              params: {limit: 1}
            reply: "tool done"
          - match: "^Agent-to-agent announce step\\.$"
            reply: "Announced: all good"
    - id: quiet
      runtime: script
      script:
        rules:
          - match: "^Agent-to-agent announce step"
            reply: "ANNOUNCE_SKIP"
    - id: kid
      runtime: script
      script:
        rules:
          - match: "skip"
            reply: "ANNOUNCE_SKIP"
          - match: "slow"
            delayMs: 30000
            reply: "too late"
          - reply: "kid did: {{message}}"
    - id: req
      runtime: script
      script:
        rules:
          - match: "stopnow"
            reply: "REPLY_SKIP"
          - reply: "req says: {{message}}"
`

type env struct {
	t     *testing.T
	srv   *embedded.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	cfg   *config.Config
	op    *bus.Operator
	runs  *runs.Records
	queue *runqueue.Queue
	tr    *transcripts.Store
	names bus.Names
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	op := bustest.Operator(t)
	srv := bustest.Server(t)
	nc, js := bustest.Connect(t, srv)
	names := bus.NewNames(cfg.Bus.Prefix)
	ctx := context.Background()
	queue, err := runqueue.Open(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := runs.Open(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(recs.Close)
	tr, err := transcripts.Open(ctx, nc, js, names)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return &env{t: t, srv: srv, nc: nc, js: js, cfg: cfg, op: op, runs: recs, queue: queue, tr: tr, names: names}
}

func (e *env) gateway(id string, o Options) *Gateway {
	e.t.Helper()
	nc, _ := bustest.Connect(e.t, e.srv)
	g, err := StartWithOptions(context.Background(), nc, e.cfg, e.op, id, nil, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(g.Stop)
	return g
}

var seq int

func (e *env) request(session, agent, message string) *runqueue.Request {
	seq++
	return &runqueue.Request{
		RunID:      fmt.Sprintf("run-%d-%d", time.Now().UnixNano(), seq),
		SessionKey: session, AgentID: agent,
		Message: message, Prompt: message,
		ChainID: "chain", CreatedAt: time.Now().UnixMilli(),
	}
}

func (e *env) submit(req *runqueue.Request) {
	e.t.Helper()
	rec := &runs.Record{RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID,
		Status: runs.Pending, CreatedAt: req.CreatedAt}
	if err := submit.Run(context.Background(), e.queue, e.runs, req, rec); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) wait(runID string) *runs.Record {
	e.t.Helper()
	return runstest.WaitRun(e.t, e.runs, runID, 20*time.Second)
}

func (e *env) transcript(session string) []map[string]any {
	e.t.Helper()
	return transcriptstest.Transcript[map[string]any](e.t, e.tr, session, 100)
}

// waitState watches the A2A state until it is done.
func (e *env) waitState(primary string) *a2a.State {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, e.names.A2ABucket())
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := kv.Watch(ctx, primary)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			e.t.Fatalf("a2a %s never finished", primary)
		case en := <-w.Updates():
			if en == nil {
				continue
			}
			var st a2a.State
			if err := json.Unmarshal(en.Value(), &st); err != nil {
				e.t.Fatal(err)
			}
			if st.Done {
				return &st
			}
		}
	}
}

func TestEchoReplyAndTranscript(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	req := e.request("agent:main:main", "main", "hello there")
	req.Provenance = &runqueue.Provenance{Kind: "inter_session", SourceSessionKey: "agent:req:main", SourceTool: "sessions_send"}
	e.submit(req)
	rec := e.wait(req.RunID)
	if rec.Status != runs.OK || rec.Reply != "hello there" || rec.Gateway != "gw1" || rec.Attempts != 1 {
		t.Fatalf("record %+v", rec)
	}
	if rec.StartedAt == 0 || rec.EndedAt < rec.StartedAt {
		t.Fatalf("times %+v", rec)
	}
	msgs := e.transcript(req.SessionKey)
	if len(msgs) != 2 {
		t.Fatalf("transcript %v", msgs)
	}
	if msgs[0]["role"] != "user" || msgs[0]["content"] != "hello there" || msgs[1]["role"] != "assistant" || msgs[1]["content"] != "hello there" {
		t.Fatalf("transcript %v", msgs)
	}
	if p, _ := msgs[0]["provenance"].(map[string]any); p["kind"] != "inter_session" {
		t.Fatalf("provenance %v", msgs[0])
	}
	if m, _ := msgs[1][runMarker].(map[string]any); m["run"] != req.RunID || m["part"] != "reply" {
		t.Fatalf("marker %v", msgs[1])
	}
	st, err := sessions.Open(context.Background(), e.js, e.names)
	if err != nil {
		t.Fatal(err)
	}
	ent, _, err := st.Get(context.Background(), req.SessionKey)
	if err != nil || ent.AgentID != "main" || ent.SessionID == "" || ent.UpdatedAt == 0 {
		t.Fatalf("session entry %+v %v", ent, err)
	}
}

func TestUnknownAgentEchoes(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	req := e.request("agent:ghost:main", "ghost", "fail please")
	e.submit(req)
	if rec := e.wait(req.RunID); rec.Status != runs.OK || rec.Reply != "fail please" {
		t.Fatalf("record %+v", rec)
	}
}

func TestScriptedError(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	req := e.request("agent:main:main", "main", "fail now")
	e.submit(req)
	rec := e.wait(req.RunID)
	if rec.Status != runs.Error || rec.Error != "scripted failure" {
		t.Fatalf("record %+v", rec)
	}
	if msgs := e.transcript(req.SessionKey); len(msgs) != 1 || msgs[0]["role"] != "user" {
		t.Fatalf("transcript %v", msgs)
	}
}

func TestTimeout(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	req := e.request("agent:main:main", "main", "slow one")
	req.TimeoutSeconds = 1
	e.submit(req)
	rec := e.wait(req.RunID)
	if rec.Status != runs.Timeout || rec.Error == "" {
		t.Fatalf("record %+v", rec)
	}
}

// A run's tool calls carry its session in the token, and under
// sandbox.mode non-main the sandboxed mark for every session but the
// agent's main one, so the workers clamp what a sandboxed turn sees.
func TestToolCallsAuthenticatedAsSession(t *testing.T) {
	e := newEnv(t)
	e.cfg.Agents.Defaults.Sandbox.Mode = config.SandboxNonMain
	v := bus.NewVerifier(e.op.PublicKey())
	callers := make(chan bus.Caller, 2)
	sub, err := e.nc.Subscribe(e.names.Tool("sessions_list"), func(m *nats.Msg) {
		c, err := v.Verify(m.Header.Get(bus.HeaderToken))
		if err == nil {
			callers <- c
		}
		_ = m.Respond([]byte(`{"sessions":[]}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	e.gateway("gw1", Options{})
	for _, tc := range []struct {
		key       string
		sandboxed bool
	}{{"agent:main:main", false}, {"agent:main:telegram:group:g1", true}} {
		req := e.request(tc.key, "main", "tool time")
		e.submit(req)
		if rec := e.wait(req.RunID); rec.Status != runs.OK || rec.Reply != "tool done" {
			t.Fatalf("%s: record %+v", tc.key, rec)
		}
		select {
		case c := <-callers:
			if c.SessionKey != req.SessionKey || c.RunID != req.RunID || c.AgentID != "main" || c.Sandboxed != tc.sandboxed {
				t.Fatalf("%s: caller %+v, want sandboxed %v", tc.key, c, tc.sandboxed)
			}
		default:
			t.Fatalf("%s: tool was not called with a valid token", tc.key)
		}
	}
}

func TestSessionLaneSerialises(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{Concurrency: 8})
	e.gateway("gw2", Options{Concurrency: 8})
	var reqs []*runqueue.Request
	for i := 0; i < 4; i++ {
		r := e.request("agent:main:main", "main", fmt.Sprintf("wait %d", i))
		reqs = append(reqs, r)
		e.submit(r)
	}
	var recs []*runs.Record
	for _, r := range reqs {
		rec := e.wait(r.RunID)
		if rec.Status != runs.OK {
			t.Fatalf("record %+v", rec)
		}
		recs = append(recs, rec)
	}
	for i := range recs {
		for j := range recs {
			if i == j {
				continue
			}
			a, b := recs[i], recs[j]
			if a.StartedAt < b.EndedAt && b.StartedAt < a.EndedAt {
				t.Fatalf("runs overlap: %+v and %+v", a, b)
			}
		}
	}
	if n := len(e.transcript("agent:main:main")); n != 8 {
		t.Fatalf("transcript has %d entries, want 8", n)
	}
}

func TestRedeliveryOfFinishedRunDoesNotAppend(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw1", Options{})
	req := e.request("agent:main:main", "main", "once only")
	e.submit(req)
	if rec := e.wait(req.RunID); rec.Status != runs.OK {
		t.Fatalf("record %+v", rec)
	}
	body, _ := json.Marshal(req)
	m := nats.NewMsg(e.names.Runs(req.AgentID))
	m.Data = body
	if _, err := e.js.PublishMsg(context.Background(), m, jetstream.WithMsgID(req.RunID+"-again")); err != nil {
		t.Fatal(err)
	}
	waitQueueDrained(t, g)
	rec, _, err := e.runs.Get(context.Background(), req.RunID)
	if err != nil || rec.Attempts != 1 {
		t.Fatalf("record %+v %v", rec, err)
	}
	if n := len(e.transcript(req.SessionKey)); n != 2 {
		t.Fatalf("transcript has %d entries, want 2", n)
	}
}

// TestRedeliveredRunningRunSkipsAppendedParts: a gateway died after the
// prompt (and maybe the reply) was appended, and other runs' entries came
// after it; the redelivery must find its parts by position and append
// neither again, nor run the turn a second time once the reply is there.
func TestRedeliveredRunningRunSkipsAppendedParts(t *testing.T) {
	for _, withReply := range []bool{false, true} {
		e := newEnv(t)
		req := e.request("agent:main:main", "main", "crash me")
		e.submit(req)
		enc := bus.EncodeKey(req.SessionKey)
		// What the dead gateway left: record running at position 0, its parts.
		at := uint64(0)
		if _, err := e.runs.Update(context.Background(), req.RunID, func(r *runs.Record) error {
			r.Status, r.Attempts, r.Gateway, r.TranscriptAt = runs.Running, 1, "dead", &at
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		prompt, _ := json.Marshal(map[string]any{"role": "user", "content": req.Prompt, runMarker: marker{Run: req.RunID, Part: "prompt"}})
		parts := [][]byte{prompt}
		if withReply {
			reply, _ := json.Marshal(map[string]any{"role": "assistant", "content": "first reply", runMarker: marker{Run: req.RunID, Part: "reply"}})
			parts = append(parts, reply)
		}
		for i := 0; i < 12; i++ { // later runs of the same session
			parts = append(parts, []byte(fmt.Sprintf(`{"role":"user","content":"other %d"}`, i)))
		}
		if _, err := e.tr.Append(context.Background(), enc, parts...); err != nil {
			t.Fatal(err)
		}
		e.gateway("gw1", Options{})
		rec := e.wait(req.RunID)
		if rec.Status != runs.OK || rec.Attempts != 2 || rec.Gateway != "gw1" {
			t.Fatalf("record %+v", rec)
		}
		msgs := e.transcript(req.SessionKey)
		want := 14
		if withReply {
			if rec.Reply != "first reply" {
				t.Fatalf("the turn ran again: reply %q", rec.Reply)
			}
		}
		if len(msgs) != want {
			t.Fatalf("withReply=%v: transcript has %d entries, want %d: %v", withReply, len(msgs), want, msgs)
		}
	}
}

// redelivered is how many runs the shared consumer delivered more than once.
func redelivered(t *testing.T, g *Gateway) int {
	t.Helper()
	cons, err := g.Queue().Stream().Consumer(context.Background(), g.names.GatewaysConsumer())
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumRedelivered
}

func waitQueueDrained(t *testing.T, g *Gateway) {
	t.Helper()
	bustest.WaitFor(t, 20*time.Second, "queue drained", func() bool {
		n, err := g.Queue().Unfinished(context.Background())
		return err == nil && n == 0
	})
}

func a2aRequest(e *env, target, message string, turns int) *runqueue.Request {
	req := e.request(target, "main", message)
	req.A2A = &runqueue.A2A{
		RequesterKey: "agent:req:main", RequesterChannel: "webchat",
		TargetDisplayKey: target, OriginalMessage: message,
		MaxPingPongTurns: turns, AnnounceTimeoutMs: 30000,
	}
	return req
}

func (e *env) lastDelivery(channel string) (*deliveries.Delivery, nats.Header) {
	e.t.Helper()
	st, err := e.js.Stream(context.Background(), e.names.DeliverStream())
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(context.Background(), e.names.Deliver(channel))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var d deliveries.Delivery
	if err := json.Unmarshal(m.Data, &d); err != nil {
		e.t.Fatal(err)
	}
	return &d, m.Header
}

func TestA2APingPongAndAnnounce(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	target := "agent:main:discord:group:123"
	req := a2aRequest(e, target, "hi target", 2)
	e.submit(req)
	if rec := e.wait(req.RunID); rec.Status != runs.OK {
		t.Fatalf("primary %+v", rec)
	}
	st := e.waitState(req.RunID)
	if st.Turn != 2 || st.PingPongDone || st.RoundOneReply != "hi target" || st.LatestReply != "req says: hi target" || !st.Delivered {
		t.Fatalf("state %+v", st)
	}
	// Turn 1 ran in the requester session, turn 2 in the target.
	pp1 := e.wait(StepRunID(req.RunID, "pingpong:1"))
	pp2 := e.wait(StepRunID(req.RunID, "pingpong:2"))
	ann := e.wait(StepRunID(req.RunID, "announce"))
	if pp1.SessionKey != "agent:req:main" || pp1.Reply != "req says: hi target" {
		t.Fatalf("pingpong 1 %+v", pp1)
	}
	if pp2.SessionKey != target || pp2.Reply != "req says: hi target" {
		t.Fatalf("pingpong 2 %+v", pp2)
	}
	if ann.SessionKey != target || ann.Reply != "Announced: all good" {
		t.Fatalf("announce %+v", ann)
	}
	reqTr := e.transcript("agent:req:main")
	if len(reqTr) != 2 {
		t.Fatalf("requester transcript %v", reqTr)
	}
	prompt, _ := reqTr[0]["content"].(string)
	wantPrefix := "[Inter-session message] sourceSession=" + target + " sourceChannel=discord sourceTool=sessions_send isUser=false\n" + rules.InterSessionExplanation + "\nhi target"
	if prompt != wantPrefix {
		t.Fatalf("ping-pong prompt %q", prompt)
	}
	// primary (2) + pingpong 2 (2) + announce (2) in the target.
	tgt := e.transcript(target)
	if len(tgt) != 6 || tgt[4]["content"] != AnnounceMessage && !strings.HasSuffix(tgt[4]["content"].(string), "\n"+AnnounceMessage) {
		t.Fatalf("target transcript %v", tgt)
	}
	d, h := e.lastDelivery("discord")
	if d == nil {
		t.Fatal("no announce delivered")
	}
	want := deliveries.Delivery{Channel: "discord", To: "group:123", Message: "Announced: all good", SessionKey: target, RunID: req.RunID}
	if *d != want {
		t.Fatalf("delivery %+v", d)
	}
	if h.Get(jetstream.MsgIDHeader) != req.RunID+":announce" {
		t.Fatalf("msg id %q", h.Get(jetstream.MsgIDHeader))
	}
}

func TestA2AExtraSystemPrompts(t *testing.T) {
	st := &a2a.State{TargetKey: "agent:main:discord:group:1", TargetChannel: "discord", RoundOneReply: "r1", LatestReply: "latest"}
	a := &runqueue.A2A{RequesterKey: "agent:req:main", RequesterChannel: "webchat", TargetDisplayKey: "discord:group:1", OriginalMessage: "orig", MaxPingPongTurns: 2}
	got := sessionLines(a, st)
	want := "Agent 1 (requester) session: agent:req:main.\nAgent 1 (requester) channel: webchat.\nAgent 2 (target) session: discord:group:1.\nAgent 2 (target) channel: discord."
	if got != want {
		t.Fatalf("session lines %q", got)
	}
}

func TestA2AReplySkipStopsEarly(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	target := "agent:main:discord:group:9"
	req := a2aRequest(e, target, "stopnow please", 2)
	e.submit(req)
	st := e.waitState(req.RunID)
	if st.Turn != 1 || !st.PingPongDone || st.LatestReply != "stopnow please" {
		t.Fatalf("state %+v", st)
	}
	if _, _, err := e.runs.Get(context.Background(), StepRunID(req.RunID, "pingpong:2")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("pingpong 2 exists: %v", err)
	}
	ann := e.wait(StepRunID(req.RunID, "announce"))
	if ann.Reply != "Announced: all good" {
		t.Fatalf("announce %+v", ann)
	}
	if d, _ := e.lastDelivery("discord"); d == nil || d.To != "group:9" {
		t.Fatalf("delivery %+v", d)
	}
}

func TestA2ANoPingPongWhenZeroTurnsAndAnnounceSkip(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	target := "agent:quiet:discord:group:5"
	req := a2aRequest(e, target, "silent please", 0)
	req.AgentID = "quiet"
	e.submit(req)
	st := e.waitState(req.RunID)
	if st.Turn != 0 || st.Delivered {
		t.Fatalf("state %+v", st)
	}
	if _, _, err := e.runs.Get(context.Background(), StepRunID(req.RunID, "pingpong:1")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("pingpong 1 exists: %v", err)
	}
	if ann := e.wait(StepRunID(req.RunID, "announce")); ann.Reply != "ANNOUNCE_SKIP" {
		t.Fatalf("announce %+v", ann)
	}
	if d, _ := e.lastDelivery("discord"); d != nil {
		t.Fatalf("ANNOUNCE_SKIP delivered %+v", d)
	}
}

func TestAnnounceTargetResolution(t *testing.T) {
	cases := []struct {
		key  string
		e    *sessions.Entry
		want *AnnounceTarget
	}{
		{"agent:main:discord:group:123", nil, &AnnounceTarget{Channel: "discord", To: "group:123"}},
		{"agent:main:telegram:channel:77:thread:9", nil, &AnnounceTarget{Channel: "telegram", To: "channel:77", ThreadID: "9"}},
		{"agent:main:main", nil, nil},
		{"agent:main:main", &sessions.Entry{LastChannel: "telegram", LastTo: "u1", LastAccountID: "acc"}, &AnnounceTarget{Channel: "telegram", To: "u1", AccountID: "acc"}},
		{"agent:main:main", &sessions.Entry{DeliveryContext: &sessions.DeliveryContext{Channel: "slack", To: "C1", ThreadID: "t"}, LastChannel: "x", LastTo: "y"}, &AnnounceTarget{Channel: "slack", To: "C1", ThreadID: "t"}},
		{"agent:main:main", &sessions.Entry{Origin: &sessions.Origin{Provider: "whatsapp"}}, nil},
		{"agent:main:slack:channel:C9", &sessions.Entry{LastChannel: "slack", LastTo: "channel:C9", LastAccountID: "a"}, &AnnounceTarget{Channel: "slack", To: "channel:C9", AccountID: "a"}},
		{"agent:main:slack:channel:C9", nil, &AnnounceTarget{Channel: "slack", To: "channel:C9"}},
	}
	for _, c := range cases {
		got := ResolveAnnounceTarget(c.key, c.e)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s %+v: got %+v want %+v", c.key, c.e, got, c.want)
		}
	}
}

func TestTwoGatewaysShareWork(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{Concurrency: 2})
	e.gateway("gw2", Options{Concurrency: 2})
	var reqs []*runqueue.Request
	for i := 0; i < 16; i++ {
		r := e.request(fmt.Sprintf("agent:main:s%d", i), "main", "wait")
		reqs = append(reqs, r)
		e.submit(r)
	}
	by := map[string]int{}
	var mu sync.Mutex
	for _, r := range reqs {
		rec := e.wait(r.RunID)
		if rec.Status != runs.OK {
			t.Fatalf("record %+v", rec)
		}
		mu.Lock()
		by[rec.Gateway]++
		mu.Unlock()
	}
	if by["gw1"] == 0 || by["gw2"] == 0 {
		t.Fatalf("work not shared: %v", by)
	}
}

// TestDeadGatewayRunRedelivered: a replica took the message and died
// (never acked, left an unexpired-then-expired lane lock); another replica
// runs it after AckWait.
func TestDeadGatewayRunRedelivered(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cons, err := e.queue.Stream().CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: e.names.GatewaysConsumer(), AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	req := e.request("agent:main:main", "main", "orphaned")
	e.submit(req)
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++ // taken, never acked: the "dead" gateway
	}
	if n != 1 {
		t.Fatalf("fetched %d", n)
	}
	e.gateway("gw2", Options{AckWait: time.Second})
	rec := e.wait(req.RunID)
	if rec.Status != runs.OK || rec.Gateway != "gw2" || rec.Attempts != 1 {
		t.Fatalf("record %+v", rec)
	}
	if msgs := e.transcript(req.SessionKey); len(msgs) != 2 {
		t.Fatalf("transcript %v", msgs)
	}
}

// TestHeartbeatKeepsLongRun: a run longer than AckWait is not redelivered.
func TestHeartbeatKeepsLongRun(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	e := newEnv(t)
	g := e.gateway("gw1", Options{AckWait: time.Second})
	e.gateway("gw2", Options{AckWait: time.Second})
	req := e.request("agent:main:main", "main", "slow but fine")
	req.TimeoutSeconds = 30
	e.submit(req)
	rec := e.wait(req.RunID)
	if rec.Status != runs.OK || rec.Attempts != 1 || rec.Reply != "too late" {
		t.Fatalf("record %+v", rec)
	}
	waitQueueDrained(t, g)
	if n := redelivered(t, g); n != 0 {
		t.Fatalf("redelivered %d", n)
	}
	if msgs := e.transcript(req.SessionKey); len(msgs) != 2 {
		t.Fatalf("transcript %v", msgs)
	}
}

// TestA2AResumesAfterCrash: a gateway recorded the primary run ok and died
// before acking or publishing the first step; the redelivery does not run
// the turn again but moves the flow on.
func TestA2AResumesAfterCrash(t *testing.T) {
	e := newEnv(t)
	target := "agent:main:discord:group:77"
	req := a2aRequest(e, target, "resume me", 2)
	e.submit(req)
	if _, err := e.runs.Update(context.Background(), req.RunID, func(r *runs.Record) error {
		r.Status, r.Reply, r.Attempts, r.Gateway = runs.OK, "resume me", 1, "dead"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.gateway("gw1", Options{})
	st := e.waitState(req.RunID)
	if st.Turn != 2 || !st.Delivered {
		t.Fatalf("state %+v", st)
	}
	if rec, _, _ := e.runs.Get(context.Background(), req.RunID); rec.Attempts != 1 || rec.Gateway != "dead" {
		t.Fatalf("primary ran again: %+v", rec)
	}
	if n := len(e.transcript(target)); n != 4 {
		t.Fatalf("target transcript has %d entries, want 4 (pingpong 2 + announce)", n)
	}
}

// A run queued without a record (what a waiting sessions_send does) is
// recorded by the gateway that takes it, and its outcome reaches a waiter
// registered before the publish.
func TestUnrecordedRunIsRecordedByGateway(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw1", Options{})
	req := e.request("agent:main:fresh", "main", "hi")
	w, err := e.runs.Watch(req.RunID)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := e.queue.Publish(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec, err := w.Wait(ctx)
	if err != nil || rec.Status != runs.OK || rec.Reply != "hi" || rec.Attempts != 1 || rec.TranscriptAt == nil || *rec.TranscriptAt != 0 {
		t.Fatalf("record %+v %v", rec, err)
	}
	if msgs := e.transcript(req.SessionKey); len(msgs) != 2 {
		t.Fatalf("transcript %v", msgs)
	}
	// the index is current once the run is acked
	waitQueueDrained(t, g)
	n, err := e.tr.Count(context.Background(), bus.EncodeKey(req.SessionKey))
	if err != nil || n != 2 {
		t.Fatalf("count %d %v", n, err)
	}
}

// A writer outside the lane (an import) appends while the turn runs: the
// reply goes after its entry, nothing is lost or doubled.
func TestOutsideWriterDuringTurn(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	session := "agent:main:busy"
	enc := bus.EncodeKey(session)
	req := e.request(session, "main", "wait for it")
	e.submit(req)
	bustest.WaitFor(t, 20*time.Second, "the prompt", func() bool {
		n, err := e.tr.Count(context.Background(), enc)
		return err == nil && n == 1
	})
	if _, err := e.tr.Append(context.Background(), enc, []byte(`{"role":"user","content":"imported"}`)); err != nil {
		t.Fatal(err)
	}
	rec := e.wait(req.RunID)
	if rec.Status != runs.OK || rec.Reply != "waited" {
		t.Fatalf("record %+v", rec)
	}
	msgs := e.transcript(session)
	var got []string
	for _, m := range msgs {
		got = append(got, fmt.Sprint(m["content"]))
	}
	if strings.Join(got, "|") != "wait for it|imported|waited" {
		t.Fatalf("transcript %q", got)
	}
}

// What a gateway remembers of a session between its runs (lane revision,
// transcript end, session entry) goes stale when someone else writes: the
// next run notices through its compare-and-sets and loses nothing.
func TestStaleMemoryOfSessionAfterOutsideWrites(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{})
	session := "agent:main:shared"
	enc := bus.EncodeKey(session)
	first := e.request(session, "main", "one")
	e.submit(first)
	e.wait(first.RunID)

	// an import and a label change, done by hand
	if _, err := e.tr.Append(context.Background(), enc, []byte(`{"role":"user","content":"imported"}`)); err != nil {
		t.Fatal(err)
	}
	st, err := sessions.Open(context.Background(), e.js, e.names)
	if err != nil {
		t.Fatal(err)
	}
	before, _, err := st.Update(context.Background(), session, func(en *sessions.Entry) error { en.Label = "kept"; return nil })
	if err != nil {
		t.Fatal(err)
	}

	second := e.request(session, "main", "two")
	e.submit(second)
	if rec := e.wait(second.RunID); rec.Status != runs.OK || rec.Reply != "two" {
		t.Fatalf("record %+v", rec)
	}
	var got []string
	for _, m := range e.transcript(session) {
		got = append(got, fmt.Sprint(m["content"]))
	}
	if strings.Join(got, "|") != "one|one|imported|two|two" {
		t.Fatalf("transcript %q", got)
	}
	after, _, err := st.Get(context.Background(), session)
	if err != nil || after.Label != "kept" || after.UpdatedAt < before.UpdatedAt {
		t.Fatalf("session entry %+v %v (before %+v)", after, err, before)
	}
	n, err := e.tr.Count(context.Background(), enc)
	if err != nil || n != 5 {
		t.Fatalf("count %d %v", n, err)
	}
}

// The first replica creates the shared consumer with its AckWait; a later
// one with another AckWait binds to it as it is and paces its heartbeats
// by the consumer's, so it never shortens the wait under the first one. It
// only raises MaxAckPending for its own concurrency.
func TestLaterReplicaKeepsConsumerAckWait(t *testing.T) {
	e := newEnv(t)
	e.gateway("gw1", Options{AckWait: 2 * time.Second})
	g2 := e.gateway("gw2", Options{AckWait: 45 * time.Second, Concurrency: 256})
	if g2.ackWait != 2*time.Second || g2.heartbeat() != 2*time.Second/3 {
		t.Fatalf("gw2 ack wait %v heartbeat %v, want the consumer's 2s", g2.ackWait, g2.heartbeat())
	}
	cons, err := g2.Queue().Stream().Consumer(context.Background(), e.names.GatewaysConsumer())
	if err != nil {
		t.Fatal(err)
	}
	if c := cons.CachedInfo().Config; c.AckWait != 2*time.Second || c.MaxAckPending != 8*256 {
		t.Fatalf("consumer ack wait %v max ack pending %d, want 2s and 2048 (raised for gw2)", c.AckWait, c.MaxAckPending)
	}
}
