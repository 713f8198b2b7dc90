package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

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

	mu          sync.RWMutex
	changed     *sync.Cond
	byKey       map[string]*Entry
	order       *btree.BTreeG[orderItem]
	children    map[string]map[string]struct{}
	byLabel     map[string]map[string]struct{}
	bySessionID map[string][]string
	applied     uint64
	err         error

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
	ix.byKey = make(map[string]*Entry)
	ix.order = btree.NewG(32, orderLess)
	ix.children = make(map[string]map[string]struct{})
	ix.byLabel = make(map[string]map[string]struct{})
	ix.bySessionID = make(map[string][]string)
	ix.applied = 0
	ix.err = nil
}

// watch starts following the bucket and returns once every entry stored
// is applied.
func (ix *Index) watch(ctx context.Context) error {
	stream, err := ix.store.js.Stream(ctx, bus.KVStream(ix.store.KV().Bucket()))
	if err != nil {
		return fmt.Errorf("sessions bucket stream: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := ix.store.KV().WatchAll(wctx)
	if err != nil {
		cancel()
		return fmt.Errorf("watch sessions bucket: %w", err)
	}
	done := make(chan struct{})
	ready := make(chan struct{})
	go ix.follow(wctx, w, ready, done)
	ix.life.Lock()
	stopped := ix.stopped
	ix.stream, ix.cancel, ix.done = stream, cancel, done
	ix.life.Unlock()
	if stopped { // Stop ran while a recovery was starting this watch
		cancel()
		<-done
		return errors.New("session index stopped")
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		cancel()
		<-done
		return ctx.Err()
	}
}

// recover runs when the server says the sessions bucket was deleted: the
// index empties (the entries are gone), the bucket is created again empty,
// and a new watch follows it from its start. Until that succeeds, Sync and
// WaitApplied fail with the reason and nothing is listed.
// check looks at the bucket's stream every bus.CheckEvery: a deletion whose
// advisory this process missed (it was reconnecting, say) shows as a
// missing stream or one created after the one the index follows.
func (ix *Index) check() {
	defer ix.checks.Done()
	t := time.NewTicker(bus.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ix.life0.Done():
			return
		case <-t.C:
		}
		ix.life.Lock()
		followed := ix.stream.CachedInfo().Created
		ix.life.Unlock()
		ctx, cancel := context.WithTimeout(ix.life0, 5*time.Second)
		st, err := ix.store.js.Stream(ctx, bus.KVStream(ix.store.KV().Bucket()))
		cancel()
		if errors.Is(err, jetstream.ErrStreamNotFound) || (err == nil && !st.CachedInfo().Created.Equal(followed)) {
			ix.recover()
		}
	}
}

func (ix *Index) recover() {
	ix.recovering.Lock()
	defer ix.recovering.Unlock()
	bucket := ix.store.KV().Bucket()
	ix.log.Error("session index: the sessions bucket was deleted; every session entry is gone; recreating it empty", "bucket", bucket)
	ix.stopWatch()
	ix.mu.Lock()
	ix.clear()
	ix.err = fmt.Errorf("the sessions bucket %s was deleted and is being recreated", bucket)
	ix.changed.Broadcast()
	ix.mu.Unlock()
	ix.life.Lock()
	stopped := ix.stopped
	ix.life.Unlock()
	if stopped {
		return
	}
	ctx, cancel := context.WithTimeout(ix.life0, 30*time.Second)
	defer cancel()
	err := bus.AfterDeletion(ctx, func() error { return ix.store.recreate(ctx) })
	if err == nil {
		ix.mu.Lock()
		ix.err = nil
		ix.mu.Unlock()
		err = ix.watch(ctx)
	}
	if err != nil {
		ix.log.Error("session index: recreating the sessions bucket failed; restart the worker once the server is healthy", "bucket", bucket, "err", err)
		ix.mu.Lock()
		ix.err = fmt.Errorf("the sessions bucket %s was deleted and could not be recreated: %w", bucket, err)
		ix.changed.Broadcast()
		ix.mu.Unlock()
	}
}

// stopWatch ends the current watch and waits for its goroutine.
func (ix *Index) stopWatch() {
	ix.life.Lock()
	cancel, done := ix.cancel, ix.done
	ix.life.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (ix *Index) follow(ctx context.Context, w jetstream.KeyWatcher, ready, done chan struct{}) {
	defer close(done)
	defer func() { _ = w.Stop() }()
	initial := true
	for {
		// ctx too: a watch of a bucket deleted meanwhile may never close
		// its channel
		var ke jetstream.KeyValueEntry
		var ok bool
		select {
		case ke, ok = <-w.Updates():
		case <-ctx.Done():
		}
		if !ok {
			break
		}
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
	if ix.err == nil {
		ix.err = errors.New("session index stopped")
	}
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
		addTo(ix.children, p, e.Key)
	}
	if e.Label != "" {
		addTo(ix.byLabel, e.Label, e.Key)
	}
	if e.SessionID != "" {
		ix.bySessionID[e.SessionID] = append(ix.bySessionID[e.SessionID], e.Key)
	}
}

// addTo and removeFrom keep a map of key sets (children by parent, keys by
// label).
func addTo(m map[string]map[string]struct{}, k, v string) {
	set := m[k]
	if set == nil {
		set = make(map[string]struct{})
		m[k] = set
	}
	set[v] = struct{}{}
}

func removeFrom(m map[string]map[string]struct{}, k, v string) {
	if set := m[k]; set != nil {
		delete(set, v)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

func (ix *Index) unlink(e *Entry) {
	delete(ix.byKey, e.Key)
	ix.order.Delete(orderItem{e.UpdatedAt, e.Key})
	for _, p := range parents(e) {
		removeFrom(ix.children, p, e.Key)
	}
	if e.Label != "" {
		removeFrom(ix.byLabel, e.Label, e.Key)
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
	ix.life.Lock()
	stream := ix.stream
	ix.life.Unlock()
	info, err := stream.Info(ctx)
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

// EachLabeled is Each over the entries whose label is label only: a list
// filtered by label costs its matches, not the whole index.
func (ix *Index) EachLabeled(label string, fn func(*Entry) bool) {
	ix.mu.RLock()
	set := ix.byLabel[label]
	es := make([]*Entry, 0, len(set))
	for k := range set {
		es = append(es, ix.byKey[k])
	}
	ix.mu.RUnlock()
	slices.SortFunc(es, func(a, b *Entry) int {
		switch {
		case orderLess(orderItem{a.UpdatedAt, a.Key}, orderItem{b.UpdatedAt, b.Key}):
			return -1
		case orderLess(orderItem{b.UpdatedAt, b.Key}, orderItem{a.UpdatedAt, a.Key}):
			return 1
		}
		return 0
	})
	for _, e := range es {
		if !fn(e) {
			return
		}
	}
}

// Len is the number of indexed sessions.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.byKey)
}

// Stop ends the watch.
func (ix *Index) Stop() {
	ix.life.Lock()
	ix.stopped = true
	sub := ix.deleted
	ix.life.Unlock()
	ix.end()
	ix.checks.Wait()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	ix.stopWatch()
}
