package record

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Follow applies every update of a bucket watch, in order, until ctx ends
// or the watch closes, then stops the watch. ready is closed once the
// values stored when the watch started are applied (or the watch ended
// first), so a caller can wait for a complete initial view. ctx is checked
// too because the watch of a bucket deleted meanwhile may never close its
// channel. A nil ready: the caller read the initial values itself.
func Follow(ctx context.Context, w jetstream.KeyWatcher, ready chan<- struct{}, apply func(jetstream.KeyValueEntry)) {
	defer func() { _ = w.Stop() }()
	initial := ready != nil
	defer func() {
		if initial {
			close(ready)
		}
	}()
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case e, ok = <-w.Updates():
		case <-ctx.Done():
		}
		if !ok {
			return
		}
		if e == nil {
			if initial {
				initial = false
				close(ready)
			}
			continue
		}
		apply(e)
	}
}

// WaitFor waits on c until done holds: how a follower's readers wait for
// it to apply a revision. The caller holds c.L, as Wait requires, and
// holds it again on return. failed is checked before each wait: an error
// from it (the follower stopped and will not get there) ends the wait
// with that error. ctx's end wakes the wait and ends it with ctx.Err(),
// unwrapped, so a caller can tell it apart and say how far behind it was.
func WaitFor(ctx context.Context, c *sync.Cond, done func() bool, failed func() error) error {
	if done() {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		c.L.Lock()
		c.Broadcast()
		c.L.Unlock()
	})
	defer stop()
	for !done() {
		if err := failed(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c.Wait()
	}
	return nil
}
