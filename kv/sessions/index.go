package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/btree"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Index is a worker's in-memory view of the sessions bucket, kept current by
// a KV watch, so sessions_list never scans the bucket per call. Entries it
// hands out are shared and must be treated as read-only.
type Index struct {
	store  *Store
	stream jetstream.Stream
	log    *slog.Logger
	derive Derive

	mu          sync.RWMutex
	changed     *sync.Cond
	byKey       map[string]*Entry
	order       *btree.BTreeG[orderItem]
	children    map[string]map[string]struct{}
	bySessionID map[string][]string
	applied     uint64
	err         error

	cancel context.CancelFunc
	done   chan struct{}
}

type orderItem struct {
	updatedAt int64
	key       string
}

// newest first, then key, so pages are stable.
func orderLess(a, b orderItem) bool {
	if a.updatedAt != b.updatedAt {
		return a.updatedAt > b.updatedAt
	}
	return a.key < b.key
}

// Derive computes per-entry facts once, when an entry is indexed, so hot
// paths such as listing do not re-parse every key on every call.
type Derive func(*Entry) any

// StartIndex loads every entry and keeps following the bucket until Stop.
// derive may be nil.
func StartIndex(ctx context.Context, js jetstream.JetStream, store *Store, log *slog.Logger, derive Derive) (*Index, error) {
	if log == nil {
		log = slog.Default()
	}
	stream, err := js.Stream(ctx, bus.KVStream(store.KV().Bucket()))
	if err != nil {
		return nil, fmt.Errorf("sessions bucket stream: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := store.KV().WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch sessions bucket: %w", err)
	}
	ix := &Index{
		store: store, stream: stream, log: log, derive: derive,
		byKey:       make(map[string]*Entry),
		order:       btree.NewG(32, orderLess),
		children:    make(map[string]map[string]struct{}),
		bySessionID: make(map[string][]string),
		cancel:      cancel,
		done:        make(chan struct{}),
	}
	ix.changed = sync.NewCond(&ix.mu)
	ready := make(chan struct{})
	go ix.follow(w, ready)
	select {
	case <-ready:
	case <-ctx.Done():
		ix.Stop()
		return nil, ctx.Err()
	}
	return ix, nil
}

func (ix *Index) follow(w jetstream.KeyWatcher, ready chan struct{}) {
	defer close(ix.done)
	defer func() { _ = w.Stop() }()
	initial := true
	for ke := range w.Updates() {
		if ke == nil {
			if initial {
				initial = false
				close(ready)
			}
			continue
		}
		ix.apply(ke)
	}
	if initial {
		close(ready)
	}
	ix.mu.Lock()
	ix.err = errors.New("session index stopped")
	ix.changed.Broadcast()
	ix.mu.Unlock()
}

func (ix *Index) apply(ke jetstream.KeyValueEntry) {
	key, err := bus.DecodeKey(ke.Key())
	if err != nil {
		ix.log.Warn("session index: undecodable key", "key", ke.Key(), "err", err)
		return
	}
	var e *Entry
	if ke.Operation() == jetstream.KeyValuePut {
		e, err = ix.store.b.Decode(ke.Value())
		if err != nil {
			ix.log.Warn("session index: skipping corrupt entry", "key", key, "err", err)
		} else {
			e.Key = key
			if ix.derive != nil {
				e.Derived = ix.derive(e)
			}
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if old := ix.byKey[key]; old != nil {
		ix.unlink(old)
	}
	if e != nil {
		ix.link(e)
	}
	if ke.Revision() > ix.applied {
		ix.applied = ke.Revision()
	}
	ix.changed.Broadcast()
}

func (ix *Index) link(e *Entry) {
	ix.byKey[e.Key] = e
	ix.order.ReplaceOrInsert(orderItem{e.UpdatedAt, e.Key})
	for _, p := range parents(e) {
		set := ix.children[p]
		if set == nil {
			set = make(map[string]struct{})
			ix.children[p] = set
		}
		set[e.Key] = struct{}{}
	}
	if e.SessionID != "" {
		ix.bySessionID[e.SessionID] = append(ix.bySessionID[e.SessionID], e.Key)
	}
}

func (ix *Index) unlink(e *Entry) {
	delete(ix.byKey, e.Key)
	ix.order.Delete(orderItem{e.UpdatedAt, e.Key})
	for _, p := range parents(e) {
		if set := ix.children[p]; set != nil {
			delete(set, e.Key)
			if len(set) == 0 {
				delete(ix.children, p)
			}
		}
	}
	if e.SessionID != "" {
		keys := ix.bySessionID[e.SessionID]
		for i, k := range keys {
			if k == e.Key {
				keys = append(keys[:i], keys[i+1:]...)
				break
			}
		}
		if len(keys) == 0 {
			delete(ix.bySessionID, e.SessionID)
		} else {
			ix.bySessionID[e.SessionID] = keys
		}
	}
}

// parents lists both lineage fields: the reference matches a tree member by
// spawnedBy or parentSessionKey.
func parents(e *Entry) []string {
	switch {
	case e.SpawnedBy != "" && e.ParentSessionKey != "" && e.SpawnedBy != e.ParentSessionKey:
		return []string{e.SpawnedBy, e.ParentSessionKey}
	case e.SpawnedBy != "":
		return []string{e.SpawnedBy}
	case e.ParentSessionKey != "":
		return []string{e.ParentSessionKey}
	}
	return nil
}

// Sync waits until every write the server had stored when Sync was called is
// in the index: read-your-writes across workers for one stream-info round trip.
func (ix *Index) Sync(ctx context.Context) error {
	info, err := ix.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("session index sync: %w", err)
	}
	return ix.WaitApplied(ctx, info.State.LastSeq)
}

// WaitApplied waits until the index has applied revision rev.
func (ix *Index) WaitApplied(ctx context.Context, rev uint64) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.applied >= rev {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		ix.mu.Lock()
		ix.changed.Broadcast()
		ix.mu.Unlock()
	})
	defer stop()
	for ix.applied < rev {
		if ix.err != nil {
			return ix.err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("session index behind (at %d, want %d): %w", ix.applied, rev, ctx.Err())
		}
		ix.changed.Wait()
	}
	return nil
}

// Get returns the entry for key, or nil.
func (ix *Index) Get(key string) *Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.byKey[key]
}

// BySessionID returns the entries whose sessionId is id.
func (ix *Index) BySessionID(id string) []*Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	keys := ix.bySessionID[id]
	out := make([]*Entry, 0, len(keys))
	for _, k := range keys {
		if e := ix.byKey[k]; e != nil {
			out = append(out, e)
		}
	}
	return out
}

// IsChild reports whether child's lineage names parent.
func (ix *Index) IsChild(parent, child string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.children[parent][child]
	return ok
}

// Children returns the sessions whose spawnedBy or parentSessionKey is parent.
func (ix *Index) Children(parent string) []*Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	set := ix.children[parent]
	out := make([]*Entry, 0, len(set))
	for k := range set {
		if e := ix.byKey[k]; e != nil {
			out = append(out, e)
		}
	}
	return out
}

// Each calls fn for entries newest first until fn returns false. fn runs
// under the index read lock and must not call back into the index.
func (ix *Index) Each(fn func(*Entry) bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	ix.order.Ascend(func(it orderItem) bool {
		return fn(ix.byKey[it.key])
	})
}

// Len is the number of indexed sessions.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.byKey)
}

// Stop ends the watch.
func (ix *Index) Stop() {
	ix.cancel()
	<-ix.done
}
