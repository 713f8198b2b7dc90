package record

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

type counter struct {
	N int `json:"n"`
}

func open(t *testing.T) (Bucket[counter], context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	kv, _, err := bus.OpenKV(ctx, js, jetstream.KeyValueConfig{Bucket: "counters", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return New[counter](kv, js, "counter"), ctx
}

// Concurrent read-modify-writes never lose one another's change.
func TestUpdateLosesNoWrite(t *testing.T) {
	b, ctx := open(t)
	if _, err := b.Create(ctx, "c", &counter{}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, _, err := b.Update(ctx, "c", nil, 0, func(c *counter) error { c.N++; return nil }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	got, _, err := b.Get(ctx, "c")
	if err != nil || got.N != writers*each {
		t.Fatalf("counter %+v %v, want %d", got, err, writers*each)
	}
}

// A stale starting point costs a re-read, ErrUnchanged writes nothing, and an
// update function's own error aborts.
func TestUpdateFromStaleUnchangedAndAbort(t *testing.T) {
	b, ctx := open(t)
	rev, err := b.Create(ctx, "c", &counter{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Update(ctx, "c", nil, 0, func(c *counter) error { c.N = 5; return nil }); err != nil {
		t.Fatal(err)
	}
	stale := &counter{N: 1}
	got, nrev, err := b.Update(ctx, "c", stale, rev, func(c *counter) error { c.N *= 10; return nil })
	if err != nil || got.N != 50 || stale.N != 1 {
		t.Fatalf("from stale: %+v %v (stale %+v)", got, err, stale)
	}
	same, srev, err := b.Update(ctx, "c", nil, 0, func(*counter) error { return ErrUnchanged })
	if err != nil || srev != nrev || same.N != 50 {
		t.Fatalf("unchanged: %+v rev %d (want %d) %v", same, srev, nrev, err)
	}
	boom := errors.New("boom")
	if _, _, err := b.Update(ctx, "c", nil, 0, func(*counter) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("abort: %v", err)
	}
	if _, _, err := b.Update(ctx, "missing", nil, 0, func(*counter) error { return nil }); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := b.Create(ctx, "c", &counter{}); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("create over existing: %v", err)
	}
}
