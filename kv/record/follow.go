package record

import (
	"context"

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
