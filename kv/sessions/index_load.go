package sessions

import (
	"context"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// loadBatch is how many of the watch's initial values are prepared and
// filed together: one lock acquisition and one wake-up of waiters each.
const loadBatch = 256

// loadQueue bounds the batches received but not yet filed (~250k entries):
// the receiving loop stays ahead of decoding, so the watch's subscription
// does not hit its pending limits (a slow consumer) while a million entries
// arrive, without holding the whole bucket twice.
const loadQueue = 1024

type batch struct {
	kes      []jetstream.KeyValueEntry
	changes  []change
	prepared chan struct{}
}

// load files the watch's initial values, returning at its end-of-initial-
// values marker (true) or when the watch ends first (false). Receiving
// only queues the entries; decoding them (the bulk of the cost) runs on
// every core, and one goroutine files the batches in the order they came,
// so the result is the one applying them one by one gives.
func (ix *Index) load(ctx context.Context, updates <-chan jetstream.KeyValueEntry) bool {
	todo := make(chan *batch, loadQueue)
	inOrder := make(chan *batch, loadQueue)
	var workers sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		workers.Go(func() {
			var in interner // one per goroutine: interning needs no lock
			for b := range todo {
				b.changes = make([]change, len(b.kes))
				for i, ke := range b.kes {
					b.changes[i] = ix.prepare(ke, &in, false)
				}
				close(b.prepared)
			}
		})
	}
	filed := make(chan struct{})
	go func() {
		defer close(filed)
		for b := range inOrder {
			<-b.prepared
			ix.mu.Lock()
			for i := range b.changes {
				if !b.changes[i].skip {
					ix.commit(&b.changes[i])
				}
			}
			ix.changed.Broadcast()
			ix.mu.Unlock()
		}
	}()
	ok := receive(ctx, updates, func(kes []jetstream.KeyValueEntry) {
		b := &batch{kes: kes, prepared: make(chan struct{})}
		inOrder <- b // first: the filer waits on it, and todo is sure to hold it next
		todo <- b
	})
	close(todo)
	close(inOrder)
	<-filed
	workers.Wait()
	return ok
}

// receive hands the initial values to send in batches until the marker
// (true) or the end of the watch (false).
func receive(ctx context.Context, updates <-chan jetstream.KeyValueEntry, send func([]jetstream.KeyValueEntry)) bool {
	kes := make([]jetstream.KeyValueEntry, 0, loadBatch)
	defer func() {
		if len(kes) > 0 {
			send(kes)
		}
	}()
	for {
		var ke jetstream.KeyValueEntry
		var ok bool
		select {
		case ke, ok = <-updates:
		case <-ctx.Done():
		}
		if !ok {
			return false
		}
		if ke == nil {
			return true
		}
		kes = append(kes, ke)
		if len(kes) == loadBatch {
			send(kes)
			kes = make([]jetstream.KeyValueEntry, 0, loadBatch)
		}
	}
}
