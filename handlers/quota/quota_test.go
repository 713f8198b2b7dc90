package quota_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/quota"
)

// clock is a fake time that moves only when told, so every refusal below
// is decided by the token counts, never by how fast the test ran.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func unlimited() config.Quotas { return config.Quotas{} }

func mustPass(t *testing.T, e *bus.Error, what string) {
	t.Helper()
	if e != nil {
		t.Fatalf("%s: refused: %v", what, e)
	}
}

func mustRefuse(t *testing.T, e *bus.Error, what string, retry time.Duration, says string) {
	t.Helper()
	if e == nil {
		t.Fatalf("%s: passed, want a 429", what)
	}
	if e.Code != bus.CodeTooManyRequests || e.RetryAfter() != retry {
		t.Fatalf("%s: code %d retry %v, want 429 with retry %v (%s)", what, e.Code, e.RetryAfter(), retry, e.Message)
	}
	if want := fmt.Sprintf("retry after %v", retry); !strings.HasSuffix(e.Message, want) || !strings.Contains(e.Message, says) {
		t.Fatalf("%s: message %q, want it to name %q and end with %q", what, e.Message, says, want)
	}
}

func TestSessionOverItsLimitOthersUnaffected(t *testing.T) {
	c := newClock()
	q := unlimited()
	q.ToolCallsPerSession = config.Quota{Rate: 4, Burst: 3}
	var refused []string
	l := quota.New(q, quota.WithClock(c.Now), quota.OnRefused(func(k string) { refused = append(refused, k) }))
	a, b := "agent:main:a", "agent:main:b"
	for i := range 3 {
		mustPass(t, l.ToolCall(a), fmt.Sprintf("a's call %d of its burst", i+1))
	}
	mustRefuse(t, l.ToolCall(a), "a's 4th call", 250*time.Millisecond, "quotas.toolCallsPerSession")
	// the same instant: b has its own bucket, full
	for i := range 3 {
		mustPass(t, l.ToolCall(b), fmt.Sprintf("b's call %d while a is refused", i+1))
	}
	// a refused call took nothing: a quarter second later a has one token.
	// Coming back before then, a ignores its retry-after: the reply is to
	// be held for what is left of the wait.
	c.Advance(100 * time.Millisecond)
	e := l.ToolCall(a)
	mustRefuse(t, e, "a, 100ms later", 150*time.Millisecond, "session agent:main:a")
	if e.Holding() != 150*time.Millisecond {
		t.Fatalf("a back too early: hold %v, want the 150ms left of its wait", e.Holding())
	}
	c.Advance(150 * time.Millisecond)
	mustPass(t, l.ToolCall(a), "a, after its retry-after")
	e = l.ToolCall(a)
	mustRefuse(t, e, "a again", 250*time.Millisecond, "session agent:main:a")
	if e.Holding() != 0 {
		t.Fatalf("a waited as told, then was refused anew: hold %v, want none", e.Holding())
	}
	if len(refused) != 3 || refused[0] != quota.ToolCallsPerSession {
		t.Fatalf("observer saw %v, want 3 refusals of %s", refused, quota.ToolCallsPerSession)
	}
	// runs are counted apart (unlimited here)
	mustPass(t, l.Run(a), "a's run while its tool calls are refused")
}

func TestAgentLimitAcrossSessions(t *testing.T) {
	c := newClock()
	q := unlimited()
	q.ToolCallsPerSession = config.Quota{Rate: 1, Burst: 3}
	q.ToolCallsPerAgent = config.Quota{Rate: 2, Burst: 4}
	l := quota.New(q, quota.WithClock(c.Now))
	s1, s2 := "agent:ops:one", "agent:OPS:two" // one agent, however spelled
	mustPass(t, l.ToolCall(s1), "s1")
	mustPass(t, l.ToolCall(s1), "s1")
	mustPass(t, l.ToolCall(s2), "s2")
	mustPass(t, l.ToolCall(s2), "s2")
	// agent ops has used its 4; s2's own bucket still holds one
	mustRefuse(t, l.ToolCall(s2), "s2 over its agent's limit", 500*time.Millisecond, "agent ops")
	mustRefuse(t, l.ToolCall(s1), "s1 over its agent's limit", 500*time.Millisecond, "quotas.toolCallsPerAgent")
	mustPass(t, l.ToolCall("agent:other:main"), "another agent's session")
	mustPass(t, l.ToolCall("main"), "a bare key (agent main)")
	// the agent's refusal gave s2's token back: half a second later s2's
	// bucket holds 1.5 (without the give-back 0.5, and this call would be
	// refused by s2's own limit), the agent's 1
	c.Advance(500 * time.Millisecond)
	mustPass(t, l.ToolCall(s2), "s2 once its agent has a token")
	mustRefuse(t, l.ToolCall(s2), "s2 again", 500*time.Millisecond, "session agent:ops:two")
}

// A loop that ignores a long wait is held at most MaxHold a call.
func TestHoldIsCapped(t *testing.T) {
	c := newClock()
	q := unlimited()
	q.RunsPerSession = config.Quota{Rate: 0.1, Burst: 1}
	l := quota.New(q, quota.WithClock(c.Now))
	mustPass(t, l.Run("agent:main:a"), "run 1")
	if e := l.Run("agent:main:a"); e == nil || e.Holding() != 0 {
		t.Fatalf("first refusal %v: want a 429 answered at once", e)
	}
	e := l.Run("agent:main:a")
	mustRefuse(t, e, "run 3 at once", 10*time.Second, "runsPerSession")
	if e.Holding() != quota.MaxHold {
		t.Fatalf("hold %v, want MaxHold (%v) for a 10s wait", e.Holding(), quota.MaxHold)
	}
}

func TestRunsPerSessionAndAgent(t *testing.T) {
	c := newClock()
	q := unlimited()
	q.RunsPerSession = config.Quota{Rate: 0.5, Burst: 2}
	q.RunsPerAgent = config.Quota{Rate: 10, Burst: 3}
	l := quota.New(q, quota.WithClock(c.Now))
	mustPass(t, l.Run("agent:main:a"), "run 1")
	mustPass(t, l.Run("agent:main:a"), "run 2")
	mustRefuse(t, l.Run("agent:main:a"), "run 3 of a", 2*time.Second, "too many runs queued from session agent:main:a: quotas.runsPerSession allows 0.5 a second (burst 2)")
	mustPass(t, l.Run("agent:main:b"), "b's run")
	mustRefuse(t, l.Run("agent:main:c"), "c's run, agent main spent", 100*time.Millisecond, "quotas.runsPerAgent")
	for i := range 50 {
		mustPass(t, l.ToolCall("agent:main:a"), fmt.Sprintf("tool call %d (unlimited)", i))
	}
}

func TestNilAndUnlimitedAllowEverything(t *testing.T) {
	var nilLimits *quota.Limits
	if e := nilLimits.ToolCall("x"); e != nil {
		t.Fatalf("nil limits refused: %v", e)
	}
	l := quota.New(unlimited())
	for range 10000 {
		mustPass(t, l.ToolCall("agent:main:main"), "unlimited tool call")
		mustPass(t, l.Run("agent:main:main"), "unlimited run")
	}
	for _, k := range quota.Kinds {
		if n := l.Buckets(k); n != 0 {
			t.Errorf("unlimited %s keeps %d buckets, want none", k, n)
		}
	}
}

// Full buckets are dropped as new keys come, so a million sessions that
// each call once a millisecond apart leave only the last second's worth.
func TestIdleBucketsAreEvicted(t *testing.T) {
	c := newClock()
	q := unlimited()
	q.ToolCallsPerSession = config.Quota{Rate: 10, Burst: 10} // full again 1s after a call
	l := quota.New(q, quota.WithClock(c.Now))
	const keys = 1_000_000
	most := 0
	for i := range keys {
		mustPassQuiet(t, l.ToolCall(fmt.Sprintf("agent:main:s%d", i)))
		c.Advance(time.Millisecond)
		if i%1000 == 0 {
			most = max(most, l.Buckets(quota.ToolCallsPerSession))
		}
	}
	// a bucket touched at t is full at t+0.1s (one token spent, 10/s)
	if most > 101 {
		t.Fatalf("%d buckets after %d keys, want at most the 101 touched in the last 100ms", most, keys)
	}
	if n := l.Buckets(quota.ToolCallsPerAgent); n != 0 {
		t.Fatalf("unlimited per-agent limit keeps %d buckets", n)
	}
}

// A bucket that is not full is kept until the cap, then the oldest goes.
func TestBucketCap(t *testing.T) {
	c := newClock()
	q := unlimited()
	q.RunsPerSession = config.Quota{Rate: 0.001, Burst: 2}
	l := quota.New(q, quota.WithClock(c.Now), quota.WithMaxKeys(1000))
	for i := range 5000 {
		mustPassQuiet(t, l.Run(fmt.Sprintf("agent:main:s%d", i)))
	}
	if n := l.Buckets(quota.RunsPerSession); n != 1000 {
		t.Fatalf("%d buckets, want the cap of 1000", n)
	}
	// the newest keys are the ones kept: s4999 has spent one of its two
	mustPass(t, l.Run("agent:main:s4999"), "s4999's second run")
	mustRefuse(t, l.Run("agent:main:s4999"), "s4999's third run", 1000*time.Second, "runsPerSession")
}

func mustPassQuiet(t *testing.T, e *bus.Error) {
	if e != nil {
		t.Helper()
		t.Fatalf("refused: %v", e)
	}
}

// The memory of a kept bucket, for the backstop's size in docs/security.md.
func TestBucketMemory(t *testing.T) {
	q := unlimited()
	q.ToolCallsPerSession = config.Quota{Rate: 0.001, Burst: 100} // nothing refills
	l := quota.New(q)
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("agent:main:subagent:%08d-0000-0000-0000-000000000000", i)
	}
	before := heap()
	for _, k := range keys {
		mustPassQuiet(t, l.ToolCall(k))
	}
	after := heap()
	per := float64(after-before) / n
	t.Logf("%.0f bytes per bucket (keys allocated beforehand)", per)
	if per > 400 {
		t.Fatalf("%.0f bytes per bucket: DefaultMaxKeys' documented size assumes under 400", per)
	}
	runtime.KeepAlive(keys)
	runtime.KeepAlive(l)
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The cost of the check on a worker's request path: a call that passes
// (both buckets) and one refused (the session's bucket is empty).
func BenchmarkToolCall(b *testing.B) {
	b.Run("passes", func(b *testing.B) {
		l := quota.New(config.Quotas{ToolCallsPerSession: config.Quota{Rate: 1e9, Burst: 1e9}, ToolCallsPerAgent: config.Quota{Rate: 1e9, Burst: 1e9}})
		b.ReportAllocs()
		for b.Loop() {
			if e := l.ToolCall("agent:main:main"); e != nil {
				b.Fatal(e)
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		c := newClock()
		l := quota.New(config.Quotas{ToolCallsPerSession: config.Quota{Rate: 1, Burst: 1}}, quota.WithClock(c.Now))
		_ = l.ToolCall("agent:main:main")
		b.ReportAllocs()
		for b.Loop() {
			if e := l.ToolCall("agent:main:main"); e == nil {
				b.Fatal("passed")
			}
		}
	})
}
