package claims

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func open(t *testing.T) *Claims {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	c, err := Open(bustest.Context(t), js, bus.NewNames("sb"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTakeOnceFinishRelease(t *testing.T) {
	c := open(t)
	ctx := bustest.Context(t)
	rev, err := c.Take(ctx, "announce.r1", "gw-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(ctx, "announce.r1", "gw-b", time.Minute); !errors.Is(err, ErrTaken) {
		t.Fatalf("second take: %v", err)
	}
	cl, err := c.Get(ctx, "announce.r1")
	if err != nil || cl.Holder != "gw-a" || cl.Done {
		t.Fatalf("claim %+v, %v", cl, err)
	}
	if err := c.Finish(ctx, "announce.r1", "gw-a", rev); err != nil {
		t.Fatal(err)
	}
	if cl, err := c.Get(ctx, "announce.r1"); err != nil || !cl.Done {
		t.Fatalf("finished claim %+v, %v", cl, err)
	}
	if _, err := c.Take(ctx, "announce.r1", "gw-b", time.Minute); !errors.Is(err, ErrTaken) {
		t.Fatalf("take after finish: %v", err)
	}

	// a released claim can be taken again at once
	rev, err = c.Take(ctx, "announce.r2", "gw-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, "announce.r2", rev); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(ctx, "announce.r2", "gw-b", time.Minute); err != nil {
		t.Fatalf("take after release: %v", err)
	}
	if _, err := c.Get(ctx, "missing"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

func TestLeaseExpires(t *testing.T) {
	c := open(t)
	ctx := bustest.Context(t)
	rev, err := c.Take(ctx, "announce.r3", "gw-dead", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 15*time.Second, "the lease to expire", func() bool {
		_, err := c.Take(ctx, "announce.r3", "gw-b", time.Minute)
		return err == nil
	})
	// the dead holder's late finish must not overwrite the new holder's claim
	if err := c.Finish(ctx, "announce.r3", "gw-dead", rev); err == nil {
		t.Fatal("finish of an expired lease succeeded")
	}
	if cl, err := c.Get(ctx, "announce.r3"); err != nil || cl.Holder != "gw-b" {
		t.Fatalf("claim %+v, %v", cl, err)
	}
}
