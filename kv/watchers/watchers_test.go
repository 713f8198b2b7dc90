package watchers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

const (
	parent = "agent:main:main"
	child  = "agent:main:subagent:c1"
	other  = "agent:ops:main"
)

func openStore(t *testing.T) (*Store, context.Context) {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	st, err := Open(ctx, js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	return st, ctx
}

func TestSeedRules(t *testing.T) {
	st, ctx := openStore(t)
	if _, err := st.Seed(ctx, child, child, 3, Explicit); !errors.Is(err, ErrSelfWatch) {
		t.Fatalf("self-watch: %v", err)
	}
	for _, bare := range []string{"main", "global", "agent:main", "agent::x"} {
		if _, err := st.Seed(ctx, bare, child, 3, Explicit); !errors.Is(err, ErrNotQualified) {
			t.Fatalf("watcher %q: %v", bare, err)
		}
	}
	created, err := st.Seed(ctx, parent, child, 5, Implicit)
	if err != nil || !created {
		t.Fatalf("seed: %v %v", created, err)
	}
	c, err := st.Get(ctx, parent, child)
	if err != nil || c.LastSeenSequence != 5 || c.NotifiedSequence != 5 || c.MaterialSequence != 5 || c.Provenance != Implicit {
		t.Fatalf("cursor %+v %v", c, err)
	}
	// pending state survives re-registration; explicit outranks implicit
	if n, err := st.MarkMaterial(ctx, child, 9, ""); err != nil || len(n) != 1 {
		t.Fatalf("mark: %v %v", n, err)
	}
	created, err = st.Seed(ctx, parent, child, 20, Explicit)
	if err != nil || created {
		t.Fatalf("re-seed: %v %v", created, err)
	}
	c, _ = st.Get(ctx, parent, child)
	if c.LastSeenSequence != 5 || c.NotifiedSequence != 9 || c.MaterialSequence != 9 || c.Provenance != Explicit {
		t.Fatalf("re-seeded cursor %+v", c)
	}
	if _, err := st.Get(ctx, other, child); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("missing cursor: %v", err)
	}
}

// TestCoalescingAndFollowUp: many material events open one notice; an ack
// with new material opens exactly one follow-up; an ack without none.
func TestCoalescingAndFollowUp(t *testing.T) {
	st, ctx := openStore(t)
	if _, err := st.Seed(ctx, parent, child, 2, Implicit); err != nil {
		t.Fatal(err)
	}
	var notices []Notice
	for seq := uint64(10); seq < 20; seq++ {
		n, err := st.MarkMaterial(ctx, child, seq, "")
		if err != nil {
			t.Fatal(err)
		}
		notices = append(notices, n...)
	}
	if len(notices) != 1 || notices[0] != (Notice{Watcher: parent, Target: child, LastSeenSequence: 2}) {
		t.Fatalf("notices %+v", notices)
	}
	want := `Session "agent:main:subagent:c1" changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:subagent:c1" changesSince 2.`
	if notices[0].Text() != want || notices[0].ContextKey() != "session-state:6167656e743a6d61696e3a7375626167656e743a6331" {
		t.Fatalf("text %q key %q", notices[0].Text(), notices[0].ContextKey())
	}
	// a retried mark of an old event opens nothing
	if n, err := st.MarkMaterial(ctx, child, 15, ""); err != nil || len(n) != 0 {
		t.Fatalf("retry: %v %v", n, err)
	}
	pend, err := st.PendingNotices(ctx)
	if err != nil || len(pend) != 1 || pend[0] != notices[0] {
		t.Fatalf("pending %+v %v", pend, err)
	}
	follow, err := st.Ack(ctx, parent, child)
	if err != nil || follow == nil || *follow != (Notice{Watcher: parent, Target: child, LastSeenSequence: 10}) {
		t.Fatalf("follow-up %+v %v", follow, err)
	}
	follow, err = st.Ack(ctx, parent, child)
	if err != nil || follow != nil {
		t.Fatalf("second ack: %+v %v", follow, err)
	}
	c, _ := st.Get(ctx, parent, child)
	if c.Pending() || c.LastSeenSequence != 19 || c.MaterialSequence != 19 {
		t.Fatalf("drained cursor %+v", c)
	}
	if follow, err = st.Ack(ctx, parent, child); err != nil || follow != nil {
		t.Fatalf("ack with nothing pending: %+v %v", follow, err)
	}
	// the next event opens a fresh notice from the new lastSeen
	n, err := st.MarkMaterial(ctx, child, 25, "")
	if err != nil || len(n) != 1 || n[0].LastSeenSequence != 19 {
		t.Fatalf("fresh notice %+v %v", n, err)
	}
	if pend, _ := st.PendingNotices(ctx); len(pend) != 1 || pend[0].LastSeenSequence != 19 {
		t.Fatalf("pending %+v", pend)
	}
}

func TestMarkMaterialWatcherRules(t *testing.T) {
	st, ctx := openStore(t)
	for _, w := range []string{parent, other} {
		if _, err := st.Seed(ctx, w, child, 1, Explicit); err != nil {
			t.Fatal(err)
		}
	}
	// the actor is not told about its own change; a bare extra is ignored
	n, err := st.MarkMaterial(ctx, child, 4, other, "main", child)
	if err != nil || len(n) != 1 || n[0].Watcher != parent {
		t.Fatalf("notices %+v %v", n, err)
	}
	if c, _ := st.Get(ctx, other, child); c.MaterialSequence != 1 || c.Pending() {
		t.Fatalf("actor's cursor changed: %+v", c)
	}
	// a producer-supplied watcher without a cursor gets one and a notice
	third := "agent:main:subagent:boss"
	n, err = st.MarkMaterial(ctx, child, 6, "", third)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, x := range n {
		got = append(got, x.Watcher)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{third, other}) { // sorted; parent still has one pending
		t.Fatalf("notices to %v", got)
	}
	all, err := st.ForTarget(ctx, child)
	if err != nil || len(all) != 3 {
		t.Fatalf("cursors of child: %+v %v", all, err)
	}
	// a target whose key extends child's is not listed with it
	if _, err := st.Seed(ctx, parent, child+":x", 1, Explicit); err != nil {
		t.Fatal(err)
	}
	if all, _ := st.ForTarget(ctx, child); len(all) != 3 {
		t.Fatalf("cursors of child: %d", len(all))
	}
	if err := st.DeleteWatcher(ctx, parent); err != nil {
		t.Fatal(err)
	}
	if all, _ := st.ForTarget(ctx, child); len(all) != 2 {
		t.Fatalf("after reset of parent: %+v", all)
	}
	if err := st.DeleteSession(ctx, child); err != nil {
		t.Fatal(err)
	}
	if all, _ := st.All(ctx); len(all) != 0 {
		t.Fatalf("after delete: %+v", all)
	}
}

// TestConcurrentMarkOpensOneNotice: gateways racing to mark the same events
// open exactly one notice between them.
func TestConcurrentMarkOpensOneNotice(t *testing.T) {
	st, ctx := openStore(t)
	if _, err := st.Seed(ctx, parent, child, 0, Implicit); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var total int
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for seq := uint64(1); seq <= 10; seq++ {
				n, err := st.MarkMaterial(ctx, child, seq+uint64(g%2)*10, "")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += len(n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != 1 {
		t.Fatalf("%d notices opened, want 1", total)
	}
}

func TestCursorExpiry(t *testing.T) {
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	st, err := Open(ctx, js, bus.NewNames(""), WithMaxAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seed(ctx, parent, child, 1, Explicit); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 30*time.Second, "the cursor to expire", func() bool {
		_, err := st.Get(ctx, parent, child)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}
