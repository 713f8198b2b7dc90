package lanes

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ctx is the context of one test's server calls.
var ctx = bustest.Context

func open(t *testing.T) (a, b *Lanes, js jetstream.JetStream) {
	t.Helper()
	s := bustest.Server(t)
	_, js = bustest.Connect(t, s)
	var err error
	if a, err = Open(ctx(t), js, bus.NewNames(""), "gw-a", time.Second); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(ctx(t), js, bus.NewNames(""), "gw-b", time.Second); err != nil {
		t.Fatal(err)
	}
	return a, b, js
}

// A held lane is the holder's while it refreshes, and the server, not a
// gateway's clock, ends it when the refreshes stop.
func TestLeaseIsServerTimed(t *testing.T) {
	a, b, _ := open(t)
	const key = "agent:main:main"
	la, err := a.Acquire(ctx(t), key, "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx(t), key, "r2", 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("second taker: %v, want ErrBusy", err)
	}
	// the same run redelivered to its own gateway takes its lane back
	if _, err := a.Acquire(ctx(t), key, "r1", 0); err != nil {
		t.Fatalf("same run again: %v", err)
	}
	if _, err := a.Acquire(ctx(t), key, "r1", 0); err != nil {
		t.Fatalf("same run again: %v", err)
	}
	// la's revision is stale now: it cannot refresh what was rewritten
	if la.Refresh(ctx(t)) {
		t.Fatal("refresh with a stale revision succeeded")
	}
	// nobody refreshes: the server removes the lock after the lease
	var lb *Lane
	bustest.WaitFor(t, 20*time.Second, "the server to end the lease", func() bool {
		lb, err = b.Acquire(ctx(t), key, "r2", 0)
		if err != nil && !errors.Is(err, ErrBusy) {
			t.Fatal(err)
		}
		return err == nil
	})
	if _, err := a.Acquire(ctx(t), key, "r1", 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("old holder after takeover: %v, want ErrBusy", err)
	}
	if !lb.Refresh(ctx(t)) {
		t.Fatal("holder could not refresh")
	}
	rev, err := lb.Release(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	// a free lane is anyone's; the releaser's revision saves it a read
	if _, err := b.Acquire(ctx(t), key, "r3", rev); err != nil {
		t.Fatalf("acquire at freed revision: %v", err)
	}
}

// A lock an older gateway wrote with a wall-clock expiry still expires.
func TestLegacyLockExpiry(t *testing.T) {
	a, _, js := open(t)
	kv, err := js.KeyValue(ctx(t), bus.NewNames("").LanesBucket())
	if err != nil {
		t.Fatal(err)
	}
	past := `{"runId":"old","gateway":"gw-old","expiresAt":1}`
	future := `{"runId":"old","gateway":"gw-old","expiresAt":` + strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10) + `}`
	if _, err := kv.Put(ctx(t), bus.EncodeKey("agent:main:x"), []byte(past)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx(t), bus.EncodeKey("agent:main:y"), []byte(future)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx(t), "agent:main:x", "r1", 0); err != nil {
		t.Fatalf("expired legacy lock: %v", err)
	}
	if _, err := a.Acquire(ctx(t), "agent:main:y", "r1", 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("live legacy lock: %v, want ErrBusy", err)
	}
}

// A lane still naming a run whose outcome freed it (Finished) is free for
// another run, with no release written; its holder takes it again from the
// revision it held it at, and a run not finished keeps it.
func TestFinishedRunFreesLane(t *testing.T) {
	a, b, _ := open(t)
	const key = "agent:main:finished"
	done := map[string]bool{}
	finished := func(_ context.Context, runID string) (bool, error) { return done[runID], nil }
	a.Finished, b.Finished = finished, finished
	la, err := a.Acquire(ctx(t), key, "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx(t), key, "r2", 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("while r1 runs: %v, want ErrBusy", err)
	}
	done["r1"] = true
	// its holder, from the revision it held it at: one compare-and-set
	la3, err := a.Acquire(ctx(t), key, "r3", la.Rev())
	if err != nil || !la3.Resumed() || la.Resumed() {
		t.Fatalf("holder takes it again: %v (resumed %v, first take resumed %v)", err, la3 != nil && la3.Resumed(), la.Resumed())
	}
	if _, err := b.Acquire(ctx(t), key, "r2", 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("while r3 runs: %v, want ErrBusy", err)
	}
	done["r3"] = true
	if lb, err := b.Acquire(ctx(t), key, "r2", 0); err != nil || lb.Resumed() {
		t.Fatalf("after r3 finished: %v (resumed %v)", err, lb != nil && lb.Resumed())
	}
	// r3's holder finds it taken: its compare-and-set fails, and r2 is not over
	if _, err := a.Acquire(ctx(t), key, "r4", la3.Rev()); !errors.Is(err, ErrBusy) {
		t.Fatalf("taken by r2: %v, want ErrBusy", err)
	}
	failing := errors.New("runs bucket down")
	b.Finished = func(context.Context, string) (bool, error) { return false, failing }
	if _, err := b.Acquire(ctx(t), key, "r5", 0); !errors.Is(err, failing) {
		t.Fatalf("unreadable run record: %v, want its error", err)
	}
}
