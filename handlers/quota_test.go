package handlers_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/handlers/quota"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// quotaClock is a fake time: it moves only when told, so a refusal is
// decided by the token counts, never by how fast the test ran.
type quotaClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *quotaClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *quotaClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// quotaSeen records what the worker reports: every answered request by
// code, and every quota refusal by kind (what metrics.Metrics counts).
type quotaSeen struct {
	mu      sync.Mutex
	codes   []string
	refused []string
}

func (o *quotaSeen) ToolDone(_ string, _ time.Duration, code string) {
	o.mu.Lock()
	o.codes = append(o.codes, code)
	o.mu.Unlock()
}
func (o *quotaSeen) ReplyRefused(string) {}
func (o *quotaSeen) QuotaRefused(kind string) {
	o.mu.Lock()
	o.refused = append(o.refused, kind)
	o.mu.Unlock()
}

func (o *quotaSeen) refusals() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.refused...)
}

// quotaStack is a worker with only the quotas q, on a fake clock.
func quotaStack(t *testing.T, q config.Quotas) (*handlerstest.Stack, *quotaClock, *quotaSeen) {
	t.Helper()
	clock := &quotaClock{now: time.Unix(1_800_000_000, 0)}
	seen := &quotaSeen{}
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "agent"
		c.Quotas = q
	}, handlers.WithQuotaOptions(quota.WithClock(clock.Now)), handlers.WithToolObserver(seen))
	return s, clock, seen
}

func want429(t *testing.T, err error, what, says string, retry time.Duration) {
	t.Helper()
	e, ok := bus.AsError(err)
	if !ok || e.Code != bus.CodeTooManyRequests {
		t.Fatalf("%s: %v, want a 429", what, err)
	}
	if e.RetryAfter() != retry || !strings.Contains(e.Message, says) || !strings.HasSuffix(e.Message, fmt.Sprintf("retry after %v", retry)) {
		t.Fatalf("%s: %q (retryAfterMs %d), want it to name %q and retry after %v", what, e.Message, e.RetryAfterMs, says, retry)
	}
}

func TestQuotaToolCallsPerSession(t *testing.T) {
	s, clock, seen := quotaStack(t, config.Quotas{ToolCallsPerSession: config.Quota{Rate: 2, Burst: 3}})
	const a, b = "agent:main:a", "agent:main:b"
	for i := range 3 {
		if _, err := s.Call(a, "sessions_list", `{}`); err != nil {
			t.Fatalf("a's call %d: %v", i+1, err)
		}
	}
	_, err := s.Call(a, "sessions_list", `{}`)
	want429(t, err, "a's 4th call", "too many tool calls from session agent:main:a: quotas.toolCallsPerSession allows 2 a second (burst 3) on this worker", 500*time.Millisecond)
	// any tool: the limit is the caller's, not the tool's. Coming back
	// before the wait is over (a loop), a gets its answer only when the
	// wait is (in real time: the reply is held), with what is left of it.
	held := time.Now()
	_, err = s.Call(a, "session_status", `{}`)
	want429(t, err, "a's session_status, too early", "agent:main:a", time.Millisecond)
	if d := time.Since(held); d < 500*time.Millisecond {
		t.Fatalf("the early retry was answered after %v, want the reply held for the 500ms wait", d)
	}
	// the same instant, another session of the same agent is not touched
	for i := range 3 {
		if _, err := s.Call(b, "sessions_list", `{}`); err != nil {
			t.Fatalf("b's call %d while a is refused: %v", i+1, err)
		}
	}
	clock.Advance(500 * time.Millisecond)
	if _, err := s.Call(a, "sessions_list", `{}`); err != nil {
		t.Fatalf("a after its retry-after: %v", err)
	}
	if got := seen.refusals(); len(got) != 2 || got[0] != quota.ToolCallsPerSession || got[1] != quota.ToolCallsPerSession {
		t.Fatalf("quota refusals reported: %v, want 2 of %s", got, quota.ToolCallsPerSession)
	}
	// unauthenticated calls are refused as before, and count nothing
	if _, err := bus.Call(t.Context(), s.Conn, s.Worker.Deps.Names, "", "sessions_list", nil); code(err) != bus.CodeUnauthorized {
		t.Fatal("a call without a token must be 401")
	}
	if got := seen.refusals(); len(got) != 2 {
		t.Fatalf("a 401 counted as a quota refusal: %v", got)
	}
}

func TestQuotaToolCallsPerAgent(t *testing.T) {
	s, _, _ := quotaStack(t, config.Quotas{ToolCallsPerAgent: config.Quota{Rate: 10, Burst: 4}})
	for i, key := range []string{"agent:ops:one", "agent:ops:two", "agent:ops:one", "agent:ops:two"} {
		if _, err := s.Call(key, "sessions_list", `{}`); err != nil {
			t.Fatalf("call %d (%s): %v", i+1, key, err)
		}
	}
	// the first refusal says the wait; the agent's next sessions come back
	// before it is over and are held, then told what is left
	for i, key := range []string{"agent:ops:one", "agent:ops:two", "agent:ops:three"} {
		_, err := s.Call(key, "sessions_list", `{}`)
		retry := 100 * time.Millisecond
		if i > 0 {
			retry = time.Millisecond
		}
		want429(t, err, key+" over its agent's limit", "too many tool calls from agent ops: quotas.toolCallsPerAgent allows 10 a second (burst 4)", retry)
	}
	if _, err := s.Call("agent:main:main", "sessions_list", `{}`); err != nil {
		t.Fatalf("another agent's session: %v", err)
	}
}

// Runs queued: sessions_send counts against the sending session, and a
// refused send writes nothing (no record, nothing on the queue).
func TestQuotaRunsPerSessionOnSend(t *testing.T) {
	s, clock, seen := quotaStack(t, config.Quotas{RunsPerSession: config.Quota{Rate: 0.5, Burst: 2}})
	s.Import(importer.ImportOptions{SessionKey: peerKey}, `{"role":"user","content":"x"}`)
	send := `{"sessionKey":"agent:main:peer","message":"hi","timeoutSeconds":0}`
	for i := range 2 {
		if res := s.MustCall(mainKey, "sessions_send", send); res["status"] != "accepted" {
			t.Fatalf("send %d: %v", i+1, res)
		}
	}
	before := queued(t, s)
	_, err := s.Call(mainKey, "sessions_send", send)
	want429(t, err, "3rd send", "too many runs queued from session "+mainKey+": quotas.runsPerSession allows 0.5 a second (burst 2)", 2*time.Second)
	if n := queued(t, s); n != before {
		t.Fatalf("a refused send queued %d runs", n-before)
	}
	// tool calls are not runs: the same session may still read
	if _, err := s.Call(mainKey, "sessions_list", `{}`); err != nil {
		t.Fatalf("a tool call of the refused session: %v", err)
	}
	// another session sends in the same instant
	if res := s.MustCall("agent:main:other", "sessions_send", send); res["status"] != "accepted" {
		t.Fatalf("another session's send: %v", res)
	}
	clock.Advance(2 * time.Second)
	if res := s.MustCall(mainKey, "sessions_send", send); res["status"] != "accepted" {
		t.Fatalf("send after the retry-after: %v", res)
	}
	if got := seen.refusals(); len(got) != 1 || got[0] != quota.RunsPerSession {
		t.Fatalf("quota refusals reported: %v, want one of %s", got, quota.RunsPerSession)
	}
}

func TestQuotaRunsPerAgentOnSpawn(t *testing.T) {
	s, _, _ := quotaStack(t, config.Quotas{RunsPerAgent: config.Quota{Rate: 0.01, Burst: 2}})
	for i := range 2 {
		res := s.MustCall(fmt.Sprintf("agent:main:s%d", i), "sessions_spawn", `{"task":"t"}`)
		if res["status"] != "accepted" {
			t.Fatalf("spawn %d: %v", i+1, res)
		}
	}
	before := queued(t, s)
	_, err := s.Call("agent:main:s9", "sessions_spawn", `{"task":"t"}`)
	want429(t, err, "3rd spawn of agent main", "too many runs queued from agent main: quotas.runsPerAgent", 100*time.Second)
	if n := queued(t, s); n != before {
		t.Fatalf("a refused spawn queued %d runs", n-before)
	}
}

// A human turn counts against the session it is for: the adapter speaks
// for no session. A refused turn writes nothing, not even the route.
func TestQuotaRunsOnInbound(t *testing.T) {
	s, _, _ := quotaStack(t, config.Quotas{RunsPerSession: config.Quota{Rate: 0.01, Burst: 1}})
	now := time.Now().UnixMilli()
	for _, key := range []string{"agent:main:dm:alice", "agent:main:dm:bob"} {
		s.Put(&sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	}
	adapter := s.Token(bus.Caller{Adapter: "telegram"})
	turn := func(key, to string) error {
		body := fmt.Sprintf(`{"sessionKey":%q,"channel":"telegram","from":"u1","to":%q,"text":"hi"}`, key, to)
		_, err := bus.Inbound(t.Context(), s.Conn, s.Worker.Deps.Names, adapter, []byte(body))
		return err
	}
	if err := turn("agent:main:dm:alice", "first"); err != nil {
		t.Fatalf("alice's first turn: %v", err)
	}
	before := queued(t, s)
	want429(t, turn("agent:main:dm:alice", "second"), "alice's second turn", "too many runs queued from session agent:main:dm:alice", 100*time.Second)
	if n := queued(t, s); n != before {
		t.Fatalf("a refused turn queued %d runs", n-before)
	}
	if e, _, err := s.Worker.Deps.Store.Get(t.Context(), "agent:main:dm:alice"); err != nil || e.LastTo != "first" {
		t.Fatalf("the refused turn changed the session's route: %+v (%v)", e, err)
	}
	if err := turn("agent:main:dm:bob", "bob"); err != nil {
		t.Fatalf("bob's turn while alice is refused: %v", err)
	}
}
