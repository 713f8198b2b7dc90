package handlers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

const resetKey = "agent:main:telegram:dm:7"

// testClock is the worker's injected clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// resetStack is a worker whose clock the test sets, with resetKey holding
// a label, a model override and two imported transcript entries.
type resetStack struct {
	*handlerstest.Stack
	clock *testClock
}

func startReset(t *testing.T, start time.Time, edit func(*config.Config), opts ...handlers.WorkerOption) *resetStack {
	t.Helper()
	clk := &testClock{t: start}
	s := handlerstest.Start(t, edit, append([]handlers.WorkerOption{handlers.WithClock(clk.Now)}, opts...)...)
	e := &sessions.Entry{Key: resetKey, AgentID: "main", SessionID: sessions.NewID(), Label: "alice", CreatedAt: start.UnixMilli(), UpdatedAt: start.UnixMilli()}
	e.SetRare(func(r *sessions.RareFields) {
		r.SessionStartedAt, r.ProviderOverride, r.ModelOverride, r.ThinkingLevel = start.UnixMilli(), "openai", "gpt-keep", "high"
	})
	s.Put(e)
	s.Import(importer.ImportOptions{SessionKey: resetKey, AgentID: "main"},
		`{"role":"user","content":"old question"}`, `{"role":"assistant","content":"old answer"}`)
	return &resetStack{Stack: s, clock: clk}
}

// send brings a human message into resetKey at the clock's time.
func (rs *resetStack) send(text, idem string) (map[string]any, error) {
	rs.T.Helper()
	body, _ := json.Marshal(map[string]any{"sessionKey": resetKey, "channel": "telegram", "from": "7", "text": text, "idempotencyKey": idem})
	data, err := bus.Inbound(bustest.Context(rs.T), rs.Conn, rs.Worker.Deps.Names, rs.Token(bus.Caller{Adapter: "telegram"}), body)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		rs.T.Fatalf("reply %s: %v", data, err)
	}
	return out, nil
}

func (rs *resetStack) mustSend(text string) map[string]any {
	rs.T.Helper()
	out, err := rs.send(text, "")
	if err != nil {
		rs.T.Fatalf("inbound %q: %v", text, err)
	}
	return out
}

func (rs *resetStack) entry() *sessions.Entry {
	rs.T.Helper()
	e, _, err := rs.Worker.Deps.Store.Get(bustest.Context(rs.T), resetKey)
	if err != nil {
		rs.T.Fatal(err)
	}
	return e
}

// resetArchives are the reset archives of resetKey.
func (rs *resetStack) resetArchives() []*archives.Meta {
	rs.T.Helper()
	all, err := rs.Worker.Deps.Lifecycle.Archives.List(bustest.Context(rs.T))
	if err != nil {
		rs.T.Fatal(err)
	}
	var out []*archives.Meta
	for _, m := range all {
		if m.Key == resetKey && m.Reason == archives.ReasonReset {
			out = append(out, m)
		}
	}
	return out
}

// checkReset: exactly one reset archive, done, holding the old incarnation
// (read back as `sessionbus archive get` reads it); the entry has a new
// sessionId and kept its label.
func (rs *resetStack) checkReset(oldID string) *sessions.Entry {
	rs.T.Helper()
	e := rs.entry()
	if e.SessionID == oldID || e.SessionID == "" {
		rs.T.Fatalf("sessionId %q after the reset, was %q", e.SessionID, oldID)
	}
	ms := rs.resetArchives()
	if len(ms) != 1 {
		rs.T.Fatalf("%d reset archives, want 1", len(ms))
	}
	m := ms[0]
	if m.SessionID != oldID || m.State != archives.StateDone || m.Entries != 2 {
		rs.T.Fatalf("archive %+v, want the 2 entries of %s, done", m, oldID)
	}
	ctx := bustest.Context(rs.T)
	found, err := rs.Worker.Deps.Lifecycle.Archives.Find(ctx, m.ID)
	if err != nil {
		rs.T.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := rs.Worker.Deps.Lifecycle.Archives.Read(ctx, found.ID, &got); err != nil {
		rs.T.Fatal(err)
	}
	if !strings.Contains(got.String(), "old question") || !strings.Contains(got.String(), "old answer") {
		rs.T.Fatalf("archive holds %s", got.String())
	}
	// an expiry keeps the session's identity; its model and thinking
	// overrides go, as OpenClaw carries them across /new and /reset only
	if e.Label != "alice" || e.Rares().ModelOverride != "" || e.Rares().ProviderOverride != "" || e.Rares().ThinkingLevel != "" {
		rs.T.Fatalf("after the reset: label %q model %q/%q thinking %q", e.Label, e.Rares().ProviderOverride, e.Rares().ModelOverride, e.Rares().ThinkingLevel)
	}
	return e
}

func intp(n int) *int { return &n }

// TestInboundIdleReset: with session.reset idle 30 minutes, messages within
// the window keep the sessionId; the first one after it starts a new
// sessionId, archives the old transcript once, and goes into the new one.
func TestInboundIdleReset(t *testing.T) {
	t0 := time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC)
	rs := startReset(t, t0, func(c *config.Config) {
		c.Session.Reset = config.SessionReset{Mode: config.ResetIdle, IdleMinutes: intp(30)}
	})
	oldID := rs.entry().SessionID
	rs.clock.Set(t0.Add(20 * time.Minute))
	rs.mustSend("first")
	rs.clock.Set(t0.Add(50 * time.Minute)) // exactly 30 minutes after the last message: still fresh
	rs.mustSend("second")
	if e := rs.entry(); e.SessionID != oldID || len(rs.resetArchives()) != 0 {
		t.Fatalf("reset inside the idle window: sessionId %s (was %s), %d archives", e.SessionID, oldID, len(rs.resetArchives()))
	}
	later := t0.Add(80*time.Minute + time.Millisecond) // 30 minutes and 1 ms idle
	rs.clock.Set(later)
	res := rs.mustSend("after the break")
	e := rs.checkReset(oldID)
	if res["status"] != "accepted" || e.Rares().SessionStartedAt != later.UnixMilli() || e.Rares().LastInteractionAt != later.UnixMilli() {
		t.Fatalf("reply %v, sessionStartedAt %d", res, e.Rares().SessionStartedAt)
	}
}

// TestInboundDailyReset: by default a session started before today's 4:00
// (the host's zone) starts over on the first message at or after 4:00,
// once.
func TestInboundDailyReset(t *testing.T) {
	host := time.FixedZone("host", 5*3600)
	t0 := time.Date(2026, 3, 10, 22, 0, 0, 0, host)
	rs := startReset(t, t0, nil)
	oldID := rs.entry().SessionID
	rs.clock.Set(time.Date(2026, 3, 11, 3, 59, 59, 999e6, host))
	rs.mustSend("late night")
	if e := rs.entry(); e.SessionID != oldID {
		t.Fatalf("reset before 4:00: %s", e.SessionID)
	}
	rs.clock.Set(time.Date(2026, 3, 11, 4, 0, 0, 0, host))
	rs.mustSend("good morning")
	e := rs.checkReset(oldID)
	rs.clock.Set(time.Date(2026, 3, 11, 9, 0, 0, 0, host))
	rs.mustSend("later that day")
	if got := rs.entry().SessionID; got != e.SessionID || len(rs.resetArchives()) != 1 {
		t.Fatalf("a second reset the same day: %s (was %s), %d archives", got, e.SessionID, len(rs.resetArchives()))
	}
}

// TestInboundNewCommand: `/new <model> text` resets, sets the model and
// runs the text in the new session; `/reset` alone answers and queues no
// run; a retried command does not reset twice.
func TestInboundNewCommand(t *testing.T) {
	t0 := time.Now()
	rs := startReset(t, t0, nil)
	oldID := rs.entry().SessionID
	res := rs.mustSend("/new openai/gpt-next tell me more")
	e := rs.entry()
	if e.SessionID == oldID || e.Rares().ModelOverride != "gpt-next" || res["status"] != "accepted" || len(rs.resetArchives()) != 1 {
		t.Fatalf("after /new: %v, sessionId %s (was %s), model %q, %d archives", res, e.SessionID, oldID, e.Rares().ModelOverride, len(rs.resetArchives()))
	}
	if e.Label != "alice" || e.Rares().ThinkingLevel != "" {
		t.Fatalf("after /new: label %q thinking %q", e.Label, e.Rares().ThinkingLevel)
	}
	for i := range 2 {
		res, err := rs.send("/RESET", "reset-once")
		if err != nil {
			t.Fatal(err)
		}
		if res["status"] != "ok" || !strings.Contains(fmt.Sprint(res["reply"]), "New session started") || (res["repeat"] == true) != (i == 1) {
			t.Fatalf("/reset #%d: %v", i, res)
		}
	}
	if n := len(rs.resetArchives()); n != 2 {
		t.Fatalf("%d reset archives after /new and a retried /reset, want 2", n)
	}
	if e := rs.entry(); e.Rares().ModelOverride != "gpt-next" {
		t.Fatalf("/reset dropped the model override: %q", e.Rares().ModelOverride)
	}
}

// TestInboundExpiryCrash: a reset an expired session's message starts,
// stopped right after its archive was written and verified, leaves the old
// incarnation whole and a pending archive, and queues nothing; the next
// sweep finishes the reset, and the retried message runs in the new
// session with the one archive.
func TestInboundExpiryCrash(t *testing.T) {
	t0 := time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC)
	var crash atomic.Bool
	crash.Store(true)
	hook := func(d *handlers.Deps) {
		d.Lifecycle.BeforeStep = func(_, step string) error {
			if step == lifecycle.StepCursors && crash.Load() {
				return errors.New("injected crash right after the archive")
			}
			return nil
		}
	}
	rs := startReset(t, t0, func(c *config.Config) {
		c.Session.Reset = config.SessionReset{Mode: config.ResetIdle, IdleMinutes: intp(30)}
	}, hook)
	old := rs.entry()
	rs.clock.Set(t0.Add(31 * time.Minute))
	if _, err := rs.send("after the break", "msg-1"); err == nil || !strings.Contains(err.Error(), "expired (idle reset) and its reset did not finish: retry the message") {
		t.Fatalf("want the reset's failure, got %v", err)
	}
	if e := rs.entry(); e.SessionID != old.SessionID || e.Rares().LastInteractionAt != old.Rares().LastInteractionAt {
		t.Fatalf("the entry moved: %+v", e)
	}
	if n, err := rs.Worker.Deps.Transcripts.Count(bustest.Context(t), bus.EncodeKey(resetKey)); err != nil || n != 2 {
		t.Fatalf("old transcript has %d entries, want 2", n)
	}
	ms := rs.resetArchives()
	if len(ms) != 1 || ms[0].State != archives.StatePending {
		t.Fatalf("archives %d, want one pending", len(ms))
	}
	sweep := *rs.Worker.Deps.Lifecycle
	sweep.BeforeStep = nil
	sweep.Now = func() time.Time { return time.Now().Add(2 * lifecycle.DefaultPendingGrace) }
	if n, err := sweep.Finish(bustest.Context(t)); err != nil || n != 1 {
		t.Fatalf("finish: %d %v", n, err)
	}
	crash.Store(false)
	if res, err := rs.send("after the break", "msg-1"); err != nil || res["status"] != "accepted" {
		t.Fatalf("retry: %v %v", res, err)
	}
	rs.checkReset(old.SessionID)
}
