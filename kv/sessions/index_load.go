package sessions

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"strings"
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

// maxReserve bounds the room the load makes before it has the entries.
const maxReserve = 1 << 24

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
	ix.mu.Lock()
	ix.loading, ix.searching = true, false
	ix.mu.Unlock()
	filed := make(chan struct{})
	var top uint64 // the last revision filed
	go func() {
		defer close(filed)
		reserved := false
		for b := range inOrder {
			<-b.prepared
			ix.mu.Lock()
			if !reserved && len(b.kes) > 0 {
				// the first value says how many follow it (bounded: a
				// hint, not a promise)
				ix.reserve(int(min(b.kes[0].Delta()+1, maxReserve)))
				reserved = true
			}
			for i := range b.changes {
				if c := &b.changes[i]; !c.skip {
					ix.commit(c)
					top = max(top, c.rev)
				}
			}
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
	// Only now are the filed entries listed and searched, so applied (what
	// Sync and WaitApplied wait for) moves past them here, and no reader
	// sees some entries without the others.
	ix.mu.Lock()
	ix.buildOrder()
	ix.loading = false
	ix.applied = max(ix.applied, top)
	ix.changed.Broadcast()
	ix.mu.Unlock()
	return ok
}

// buildSearch builds the trigram lists of the loaded entries, once the
// index is ready: a worker answers lists (and searches, by walking the
// order) while it runs, instead of a second later at a million sessions.
// It runs on the watch's goroutine before the watch's next change, so the
// entries it reads do not change under it; readers only read them too.
func (ix *Index) buildSearch() {
	ix.mu.RLock()
	slots := ix.slots
	ix.mu.RUnlock()
	var x postings
	x.reset()
	x.build(slots, runtime.GOMAXPROCS(0))
	ix.mu.Lock()
	ix.search, ix.searching = x, true
	ix.changed.Broadcast()
	ix.mu.Unlock()
}

// buildOrder fills the empty order tree with every indexed slot: sorted
// first on a flat copy of what newer compares, then inserted in order, each
// insert finding its place in the nodes the last one touched.
func (ix *Index) buildOrder() {
	type item struct {
		pinned bool
		at     int64
		key    string
		slot   uint32
	}
	items := make([]item, 0, len(ix.slots)-len(ix.free))
	for slot, e := range ix.slots {
		if e != nil {
			items = append(items, item{e.Pinned, e.UpdatedAt, e.Key, uint32(slot)})
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		if a.pinned != b.pinned {
			if a.pinned {
				return -1 // pinned first
			}
			return 1
		}
		if a.at != b.at {
			return cmp.Compare(b.at, a.at) // newer first
		}
		return strings.Compare(a.key, b.key)
	})
	ix.rank = make([]uint32, len(ix.slots))
	for i, it := range items {
		ix.rank[it.slot] = uint32(i)
	}
	ix.order.Clear(false)
	for _, it := range items {
		ix.order.ReplaceOrInsert(it.slot)
	}
	ix.rank = nil
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
