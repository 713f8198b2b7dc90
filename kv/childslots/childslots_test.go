package childslots

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

var ctx = bustest.Context

// open gives two gateways' views of one bucket of n slots.
func open(t *testing.T, n int) (a, b *Slots, js jetstream.JetStream) {
	t.Helper()
	s := bustest.Server(t)
	_, js = bustest.Connect(t, s)
	var err error
	if a, err = Open(ctx(t), js, bus.NewNames(""), "gw-a", n, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	if b, err = Open(ctx(t), js, bus.NewNames(""), "gw-b", n, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return a, b, js
}

// waitFull waits until s's view sees every slot held by others than runID.
func waitFull(t *testing.T, s *Slots, runID string, full bool) {
	t.Helper()
	bustest.WaitFor(t, 10*time.Second, "the view follows the bucket", func() bool { return s.Full(runID) == full })
}

// Two gateways share two slots: a third run is refused on both, a freed
// slot is taken again, and a run redelivered takes back the slot it holds.
func TestSlotsBoundTheFleet(t *testing.T) {
	a, b, _ := open(t, 2)
	s1, err := a.Acquire(ctx(t), "r1")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.Acquire(ctx(t), "r2")
	if err != nil {
		t.Fatal(err)
	}
	if s1.Key() == s2.Key() {
		t.Fatalf("both runs hold %s", s1.Key())
	}
	for _, s := range []*Slots{a, b} {
		if _, err := s.Acquire(ctx(t), "r3"); !errors.Is(err, ErrFull) {
			t.Fatalf("%s: a third run took a slot: %v", s.owner, err)
		}
	}
	waitFull(t, a, "r3", true)
	waitFull(t, b, "r3", true)
	if a.Full("r2") {
		t.Fatal("r2 holds a slot, yet the view calls it full for r2")
	}
	// redelivered to the other gateway: r1 takes its own slot back
	waitFull(t, b, "r1", false)
	again, err := b.Acquire(ctx(t), "r1")
	if err != nil || again.Key() != s1.Key() {
		t.Fatalf("r1 again: %v, %v (held %s)", again, err, s1.Key())
	}
	if s1.Refresh(ctx(t)) {
		t.Fatal("the first gateway's copy of the slot still refreshes after the takeover")
	}
	if err := s2.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitFull(t, a, "r3", false)
	s3, err := a.Acquire(ctx(t), "r3")
	if err != nil || s3.Key() != s2.Key() {
		t.Fatalf("r3 after the release: %v, %v", s3, err)
	}
	// releasing a lost slot leaves it to its holder
	if err := s1.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx(t), "r4"); !errors.Is(err, ErrFull) {
		t.Fatalf("r4 took a slot: %v", err)
	}
}

// A gateway that dies holding a slot loses it when the server expires it:
// a lease after its last refresh another run takes it; while it refreshes
// nobody does.
func TestDeadHoldersSlotExpires(t *testing.T) {
	a, b, _ := open(t, 1)
	held, err := a.Acquire(ctx(t), "r1")
	if err != nil {
		t.Fatal(err)
	}
	waitFull(t, b, "r2", true)
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) { // refreshed: never taken
		if !held.Refresh(ctx(t)) {
			t.Fatal("refresh failed")
		}
		if _, err := b.Acquire(ctx(t), "r2"); !errors.Is(err, ErrFull) {
			t.Fatalf("r2 took a refreshed slot: %v", err)
		}
		time.Sleep(300 * time.Millisecond) // the holder's heartbeat period, not a sync
	}
	// the holder stops refreshing (dies): the slot frees itself
	var taken *Slot
	bustest.WaitFor(t, 10*time.Second, "the dead holder's slot is taken", func() bool {
		taken, err = b.Acquire(ctx(t), "r2")
		return err == nil
	})
	if taken.Key() != held.Key() || held.Refresh(ctx(t)) {
		t.Fatalf("took %s; the dead holder's copy still refreshes", taken.Key())
	}
}
