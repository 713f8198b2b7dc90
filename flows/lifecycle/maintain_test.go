package lifecycle

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

const day = 24 * time.Hour

// agedSessions creates sessions updated at the given ages before now, and
// one pinned 90 days old; it returns the keys.
func (e *env) agedSessions(now time.Time, ages map[string]time.Duration) {
	e.t.Helper()
	for k, age := range ages {
		e.session(k, 2, now.Add(-age).UnixMilli())
	}
	e.session("agent:main:pinned", 2, now.Add(-90*day).UnixMilli())
	if _, _, err := e.ops.Sessions.Update(e.ctx, "agent:main:pinned", func(x *sessions.Entry) error { x.Pinned = true; return nil }); err != nil {
		e.t.Fatal(err)
	}
}

var maintenanceAges = map[string]time.Duration{
	"agent:main:old":    31 * day,
	"agent:main:past":   30*day + time.Millisecond, // just past pruneAfter
	"agent:main:edge":   30 * day,                  // exactly pruneAfter: not past it
	"agent:main:recent": time.Hour,
}

func (e *env) keys() []string {
	e.t.Helper()
	all, err := e.ops.allStamps(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, x := range all {
		out = append(out, x.Key)
	}
	slices.Sort(out)
	return out
}

func actionKeys(r *Report, kind string) []string {
	var out []string
	for _, a := range r.Actions {
		if a.Kind == kind {
			out = append(out, a.Key)
		}
	}
	return out
}

// TestMaintainEnforce: enforce mode prunes exactly the entries not updated
// within pruneAfter, oldest first, each archived (reason deleted) first;
// a pinned one stays.
func TestMaintainEnforce(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.agedSessions(now, maintenanceAges)
	e.ops.Now = func() time.Time { return now }
	rep, err := e.ops.Maintain(e.ctx, Maintenance{Enforce: true, PruneAfter: 30 * day, MaxEntries: 500})
	if err != nil {
		t.Fatal(err)
	}
	if got := actionKeys(rep, ActionPrune); !slices.Equal(got, []string{"agent:main:old", "agent:main:past"}) || len(rep.Actions) != 2 {
		t.Fatalf("pruned %v (actions %+v)", got, rep.Actions)
	}
	for _, a := range rep.Actions {
		if !a.Applied {
			t.Fatalf("not applied: %+v", a)
		}
	}
	if got := e.keys(); !slices.Equal(got, []string{"agent:main:edge", "agent:main:pinned", "agent:main:recent"}) {
		t.Fatalf("left %v", got)
	}
	for _, k := range []string{"agent:main:old", "agent:main:past"} {
		e.deleted(k)
		all, _ := e.ops.Archives.List(e.ctx)
		if !slices.ContainsFunc(all, func(m *archives.Meta) bool {
			return m.Key == k && m.Reason == archives.ReasonDeleted && m.State == archives.StateDone && m.Entries == 2
		}) {
			t.Fatalf("%s: no done deleted archive", k)
		}
	}
}

// TestMaintainWarn: warn mode changes nothing and logs, at WARN, what
// enforce would prune.
func TestMaintainWarn(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.agedSessions(now, maintenanceAges)
	var logs bytes.Buffer
	e.ops.Log = slog.New(slog.NewTextHandler(&logs, nil))
	e.ops.Now = func() time.Time { return now }
	rep, err := e.ops.Maintain(e.ctx, MaintenanceFrom(config.Maintenance{Mode: "warn", PruneAfter: "30d", MaxEntries: 500, ResetArchiveRetention: "false"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := actionKeys(rep, ActionPrune); !slices.Equal(got, []string{"agent:main:old", "agent:main:past"}) || rep.Enforce {
		t.Fatalf("report %+v", rep)
	}
	if got := e.keys(); len(got) != len(maintenanceAges)+1 {
		t.Fatalf("warn mode removed entries: left %v", got)
	}
	if all, _ := e.ops.Archives.List(e.ctx); len(all) != 0 {
		t.Fatalf("warn mode wrote %d archives", len(all))
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"session maintenance (warn mode): nothing changed; mode enforce would take these actions\" prune=2 pruneOldest=\"agent:main:old at ") ||
		!strings.Contains(logs.String(), ", agent:main:past at ") {
		t.Fatalf("no WARN line naming both in:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "agent:main:edge") || strings.Contains(logs.String(), "agent:main:recent") {
		t.Fatalf("fresh entries logged:\n%s", logs.String())
	}
}

// TestMaintainMaxEntries: over maxEntries, the least recently updated
// entries go until maxEntries are left.
func TestMaintainMaxEntries(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	for i, k := range []string{"agent:main:a", "agent:main:b", "agent:main:c", "agent:main:d", "agent:main:e"} {
		e.session(k, 1, now.Add(time.Duration(i)*time.Minute).UnixMilli())
	}
	e.ops.Now = func() time.Time { return now }
	rep, err := e.ops.Maintain(e.ctx, Maintenance{Enforce: true, PruneAfter: 30 * day, MaxEntries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := actionKeys(rep, ActionCap); !slices.Equal(got, []string{"agent:main:a", "agent:main:b"}) {
		t.Fatalf("capped %v", got)
	}
	if got := e.keys(); !slices.Equal(got, []string{"agent:main:c", "agent:main:d", "agent:main:e"}) {
		t.Fatalf("left %v", got)
	}
}

// TestMaintainArchiveRetention: reset and delete archives older than
// resetArchiveRetention go, oldest first; other archives and younger ones
// stay; without a retention every archive stays.
func TestMaintainArchiveRetention(t *testing.T) {
	e := newEnv(t)
	e.session("agent:main:r", 2, 1)
	e.session("agent:main:d", 2, 1)
	e.session("agent:main:x", 2, 1)
	if _, err := e.ops.Reset(e.ctx, "agent:main:r", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Delete(e.ctx, "agent:main:d", archives.ReasonDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.Delete(e.ctx, "agent:main:x", archives.ReasonArchived, nil); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Hour)
	e.ops.Now = func() time.Time { return later }
	p := Maintenance{Enforce: true, PruneAfter: 365 * day, MaxEntries: 500}
	if rep, err := e.ops.Maintain(e.ctx, p); err != nil || len(rep.Actions) != 0 {
		t.Fatalf("no retention: %+v %v", rep, err)
	}
	p.ArchiveRetention = 3 * time.Hour
	if rep, err := e.ops.Maintain(e.ctx, p); err != nil || len(rep.Actions) != 0 {
		t.Fatalf("young archives: %+v %v", rep, err)
	}
	p.ArchiveRetention = time.Hour
	rep, err := e.ops.Maintain(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := actionKeys(rep, ActionArchive); !slices.Equal(got, []string{"agent:main:r", "agent:main:d"}) {
		t.Fatalf("archives removed: %v", got)
	}
	all, _ := e.ops.Archives.List(e.ctx)
	if len(all) != 1 || all[0].Key != "agent:main:x" {
		t.Fatalf("archives left: %d", len(all))
	}
}

// TestMaintainLease: of the processes whose sweeps call MaintainLeased
// within one interval, one runs the pass.
func TestMaintainLease(t *testing.T) {
	e := newEnv(t)
	p := Maintenance{Enforce: true, PruneAfter: day, MaxEntries: 500}
	other := *e.ops
	_, ran1, err1 := e.ops.MaintainLeased(e.ctx, "gw-1", time.Minute, p)
	_, ran2, err2 := other.MaintainLeased(e.ctx, "gw-2", time.Minute, p)
	if err1 != nil || err2 != nil || !ran1 || ran2 {
		t.Fatalf("ran %v %v, errors %v %v", ran1, ran2, err1, err2)
	}
}

// TestResetStaleCrash: a stale reset stopped between its archive and its
// new sessionId leaves the old incarnation and a pending archive; the next
// sweep finishes it, and the expiry found again later resets nothing more.
func TestResetStaleCrash(t *testing.T) {
	for _, step := range []string{StepCursors, StepTranscript, StepEntry, StepDone} {
		t.Run(step, func(t *testing.T) {
			e := newEnv(t)
			old, entries := e.session("agent:main:stale", 3, 1)
			crash := errors.New("crash")
			e.ops.BeforeStep = func(_, s string) error {
				if s == step {
					return crash
				}
				return nil
			}
			if _, err := e.ops.ResetStale(e.ctx, old.Key, old.SessionID); !errors.Is(err, crash) {
				t.Fatalf("err %v", err)
			}
			if n, err := e.fresh().Finish(e.ctx); err != nil || n != 1 {
				t.Fatalf("finish %d %v", n, err)
			}
			cur := e.wasReset(old.Key, old)
			e.archived(old.Key, old.SessionID, archives.ReasonReset, entries)
			e.ops.BeforeStep = nil
			if res, err := e.ops.ResetStale(e.ctx, old.Key, old.SessionID); err != nil || res != nil {
				t.Fatalf("second reset of the same incarnation: %+v %v", res, err)
			}
			if again, _, _ := e.ops.Sessions.Get(e.ctx, old.Key); again.SessionID != cur.SessionID {
				t.Fatalf("sessionId moved again: %s", again.SessionID)
			}
		})
	}
}

// TestMaintainWarnSummary: a warn-mode pass over a store far over
// maxEntries logs one WARN line with the count of each kind and the
// oldest few, not a line per action, while its report keeps every action.
func TestMaintainWarnSummary(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	const n, keep = 40, 5
	for i := range n {
		at := now.Add(-time.Duration(n-i) * time.Minute).UnixMilli()
		if i < 2 {
			at = now.Add(-40 * day).UnixMilli() // past pruneAfter
		}
		if _, err := e.ops.Sessions.Create(e.ctx, &sessions.Entry{Key: fmt.Sprintf("agent:main:s%02d", i), AgentID: "main", SessionID: sessions.NewID(), CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	e.ops.Log = slog.New(slog.NewTextHandler(&logs, nil))
	e.ops.Now = func() time.Time { return now }
	rep, err := e.ops.Maintain(e.ctx, Maintenance{PruneAfter: 30 * day, MaxEntries: keep})
	if err != nil {
		t.Fatal(err)
	}
	if p, c := actionKeys(rep, ActionPrune), actionKeys(rep, ActionCap); len(p) != 2 || len(c) != n-2-keep || c[0] != "agent:main:s02" {
		t.Fatalf("report: prune %v, cap %v", p, c)
	}
	if lines := strings.Count(logs.String(), "level=WARN"); lines != 1 {
		t.Fatalf("%d WARN lines for one pass, want 1:\n%s", lines, logs.String())
	}
	for _, want := range []string{" prune=2 ", fmt.Sprintf(" cap=%d ", n-2-keep), "agent:main:s02 at ", "agent:main:s06 at "} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the summary lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "agent:main:s07") {
		t.Fatalf("the summary names more than the %d oldest caps:\n%s", warnOldest, logs.String())
	}
	if got := e.keys(); len(got) != n {
		t.Fatalf("warn mode removed entries: %d left", len(got))
	}
}
