package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/btree"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Index is a worker's in-memory view of the sessions bucket, kept current by
// a KV watch, so sessions_list never scans the bucket per call. Entries it
// hands out are shared and must be treated as read-only.
type Index struct {
	store  *Store
	log    *slog.Logger
	derive Derive

	mu      sync.RWMutex
	changed *sync.Cond
	// Every indexed entry has a slot, a small number it keeps until it is
	// deleted: the lookups below hold 4-byte slots instead of keys or
	// pointers, which is most of what keeps the index near 1 KiB per
	// session (BenchmarkIndexBytesPerSession).
	slots []*Entry // by slot; nil: free
	free  []uint32
	byKey keyTable
	order *btree.BTreeG[uint32] // pinned first, then newest, then key
	// loading: the initial load is filing entries, and order is built
	// once at its end (from a sort, cheaper than a million inserts).
	loading bool
	// rank, while buildOrder fills order, is each slot's place in the
	// sorted order: the tree compares two numbers instead of reading two
	// entries (cache misses, at a million) per step of each insert.
	rank []uint32
	// children: slots by parent key; byLabel: slots by label.
	children map[string][]uint32
	parentsF parentFilter
	byLabel  map[string][]uint32
	// bySessionID has the first entry of each sessionId; the rare ids
	// that several keys share have the others in sharedIDs.
	bySessionID keyTable
	sharedIDs   map[string][]uint32
	search      postings
	// searching: the trigram lists hold every indexed entry and are kept
	// with each change. False from the start of a load until its lists
	// are built, which happens after the index is ready (a million
	// sessions' take a second): searches walk the order meanwhile.
	searching bool
	intern    interner
	applied   uint64
	err       error

	// life guards the current watch and the deletion subscription.
	life    sync.Mutex
	stream  jetstream.Stream
	cancel  context.CancelFunc
	done    chan struct{}
	deleted *nats.Subscription
	stopped bool
	// life0 ends with Stop, so a recovery in progress gives up then.
	life0  context.Context
	end    context.CancelFunc
	checks sync.WaitGroup
	// recovering serializes recover: the advisory and the check may both
	// call it for one deletion.
	recovering sync.Mutex
}

// pinned first (OpenClaw lists pinned sessions first), then newer, then
// key, so pages are stable.
func newer(a, b *Entry) bool {
	if a.Pinned != b.Pinned {
		return a.Pinned
	}
	if a.UpdatedAt != b.UpdatedAt {
		return a.UpdatedAt > b.UpdatedAt
	}
	return a.Key < b.Key
}

// Derive computes per-entry facts once, when an entry is indexed, so hot
// paths such as listing do not re-parse every key on every call. It is
// called from several goroutines at once while the index loads, so it must
// only read the entry it is given.
type Derive func(*Entry) *Derived

// StartIndex loads every entry and keeps following the bucket until Stop.
// derive may be nil.
func StartIndex(ctx context.Context, js jetstream.JetStream, store *Store, log *slog.Logger, derive Derive) (*Index, error) {
	if log == nil {
		log = slog.Default()
	}
	ix := &Index{store: store, log: log, derive: derive}
	ix.life0, ix.end = context.WithCancel(context.Background())
	ix.changed = sync.NewCond(&ix.mu)
	ix.clear()
	if err := ix.watch(ctx); err != nil {
		return nil, err
	}
	// A deleted bucket takes every entry with it, and the watch would
	// neither say so nor see a recreated bucket from its start: the index
	// would go on listing sessions that no longer exist.
	sub, err := bus.OnStreamDeleted(js.Conn(), bus.KVStream(store.KV().Bucket()), ix.recover)
	if err != nil {
		ix.stopWatch()
		return nil, fmt.Errorf("follow deletion of the sessions bucket: %w", err)
	}
	ix.deleted = sub
	ix.checks.Add(1)
	go ix.check()
	return ix, nil
}

// clear empties the index (mu held or not yet shared).
func (ix *Index) clear() {
	ix.slots, ix.free = nil, nil
	ix.byKey = keyTable{keyOf: func(s uint32) string { return ix.slots[s].Key }}
	ix.order = btree.NewG(32, func(a, b uint32) bool {
		if ix.rank != nil {
			return ix.rank[a] < ix.rank[b]
		}
		return newer(ix.slots[a], ix.slots[b])
	})
	ix.children = make(map[string][]uint32)
	ix.parentsF.reset()
	ix.byLabel = make(map[string][]uint32)
	ix.bySessionID = keyTable{keyOf: func(s uint32) string { return ix.slots[s].SessionID }}
	ix.sharedIDs = make(map[string][]uint32)
	ix.search.reset()
	ix.searching = true // an empty index's lists are complete
	ix.intern = interner{}
	ix.applied = 0
	ix.loading = false
	ix.err = nil
}
