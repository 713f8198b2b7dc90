package record

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// WaitFor returns once done holds (at once, or after the Broadcast that
// made it so), with failed's error when the follower stops first, and
// with ctx's own error, unwrapped, when ctx ends while it waits.
func TestWaitFor(t *testing.T) {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	applied := 0
	var stopped error
	done := func() bool { return applied >= 3 }
	failed := func() error { return stopped }
	wait := func(ctx context.Context) <-chan error {
		out := make(chan error, 1)
		go func() {
			mu.Lock()
			defer mu.Unlock()
			out <- WaitFor(ctx, c, done, failed)
		}()
		return out
	}
	set := func(fn func()) {
		mu.Lock()
		fn()
		c.Broadcast()
		mu.Unlock()
	}
	get := func(ch <-chan error) error {
		select {
		case err := <-ch:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("WaitFor did not return")
			return nil
		}
	}

	ch := wait(context.Background())
	set(func() { applied = 3 })
	if err := get(ch); err != nil {
		t.Fatalf("applied: %v", err)
	}
	if err := get(wait(context.Background())); err != nil {
		t.Fatalf("already applied: %v", err)
	}

	applied = 0
	ctx, cancel := context.WithCancel(context.Background())
	ch = wait(ctx)
	cancel()
	if err := get(ch); err != context.Canceled {
		t.Fatalf("ctx ended: got %v, want context.Canceled itself", err)
	}

	ch = wait(context.Background())
	boom := errors.New("watch ended")
	set(func() { stopped = boom })
	if err := get(ch); err != boom {
		t.Fatalf("follower stopped: got %v, want %v", err, boom)
	}
}
