package sessions

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
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
	// session (issue 17).
	slots []*Entry // by slot; nil: free
	free  []uint32
	byKey map[string]uint32
	order *btree.BTreeG[uint32] // newest first, then key
	// children: slots by parent key; byLabel: slots by label.
	children map[string][]uint32
	parentsF parentFilter
	byLabel  map[string][]uint32
	// bySessionID has the first entry of each sessionId; the rare ids
	// that several keys share have the others in sharedIDs.
	bySessionID map[string]uint32
	sharedIDs   map[string][]uint32
	search      signatures
	intern      interner
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

// newer first, then key, so pages are stable.
func newer(a, b *Entry) bool {
	if a.UpdatedAt != b.UpdatedAt {
		return a.UpdatedAt > b.UpdatedAt
	}
	return a.Key < b.Key
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
	ix.slots, ix.free = nil, nil
	ix.byKey = make(map[string]uint32)
	ix.order = btree.NewG(32, func(a, b uint32) bool { return newer(ix.slots[a], ix.slots[b]) })
	ix.children = make(map[string][]uint32)
	ix.parentsF.reset()
	ix.byLabel = make(map[string][]uint32)
	ix.bySessionID = make(map[string]uint32)
	ix.sharedIDs = make(map[string][]uint32)
	ix.search = signatures{}
	ix.intern = interner{}
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
	record.Follow(ctx, w, ready, ix.apply)
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
		}
	}
	var sig signature
	if e != nil {
		// Only the watch goroutine applies, so the intern table needs no
		// lock (recover clears it after that goroutine ended).
		ix.intern.entry(e)
		ix.mu.RLock()
		var prev *Entry
		if slot, ok := ix.byKey[key]; ok {
			prev = ix.slots[slot]
		}
		ix.mu.RUnlock()
		pack(e, prev)
		key = e.Key
		if ix.derive != nil {
			e.Derived = ix.derive(e)
		}
		sig = entrySignature(e)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	slot, had := ix.byKey[key]
	switch {
	case had && e != nil:
		old := ix.slots[slot]
		ix.unlink(slot)
		if oldSig := entrySignature(old); oldSig != sig {
			ix.search.set(slot, oldSig, false)
			ix.search.set(slot, sig, true)
		}
		ix.link(slot, e)
	case had:
		ix.search.set(slot, entrySignature(ix.slots[slot]), false)
		ix.unlink(slot)
		delete(ix.byKey, key)
		ix.slots[slot] = nil
		ix.free = append(ix.free, slot)
	case e != nil:
		slot = ix.newSlot()
		ix.byKey[key] = slot
		ix.search.set(slot, sig, true)
		ix.link(slot, e)
	}
	if ke.Revision() > ix.applied {
		ix.applied = ke.Revision()
	}
	ix.changed.Broadcast()
}

// newSlot takes a free slot or adds one.
func (ix *Index) newSlot() uint32 {
	if n := len(ix.free); n > 0 {
		slot := ix.free[n-1]
		ix.free = ix.free[:n-1]
		return slot
	}
	ix.slots = append(ix.slots, nil)
	ix.search.grow(cap(ix.slots))
	return uint32(len(ix.slots) - 1)
}

// link files e under slot in every lookup but byKey and the signatures.
func (ix *Index) link(slot uint32, e *Entry) {
	ix.slots[slot] = e
	ix.order.ReplaceOrInsert(slot)
	for _, p := range parents(e) {
		kids, had := ix.children[p]
		// by key, so a list row's childSessions need no sort per call
		at, _ := slices.BinarySearchFunc(kids, e.Key, func(s uint32, key string) int { return strings.Compare(ix.slots[s].Key, key) })
		ix.children[p] = slices.Insert(kids, at, slot)
		if !had {
			ix.parentsF.add(p, ix.children)
		}
	}
	if e.Label != "" {
		ix.byLabel[e.Label] = append(ix.byLabel[e.Label], slot)
	}
	if id := e.SessionID; id != "" {
		if _, taken := ix.bySessionID[id]; taken {
			ix.sharedIDs[id] = append(ix.sharedIDs[id], slot)
		} else {
			ix.bySessionID[id] = slot
		}
	}
}

// unlink undoes link for the entry in slot (still there: the order tree
// finds it by its fields).
func (ix *Index) unlink(slot uint32) {
	e := ix.slots[slot]
	ix.order.Delete(slot)
	for _, p := range parents(e) {
		removeSlot(ix.children, p, slot)
	}
	if e.Label != "" {
		removeSlot(ix.byLabel, e.Label, slot)
	}
	if id := e.SessionID; id != "" {
		if ix.bySessionID[id] != slot {
			removeSlot(ix.sharedIDs, id, slot)
		} else if more := ix.sharedIDs[id]; len(more) > 0 {
			ix.bySessionID[id] = more[0]
			removeSlot(ix.sharedIDs, id, more[0])
		} else {
			delete(ix.bySessionID, id)
		}
	}
}

// removeSlot takes slot out of m[k], dropping k once it holds none.
func removeSlot(m map[string][]uint32, k string, slot uint32) {
	list := m[k]
	if i := slices.Index(list, slot); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(m, k)
	} else {
		m[k] = list
	}
}

// parentFilter is a one-hash Bloom filter of the keys the index holds
// children for: a list page looks up the children of each of its rows,
// most have none, and a probe of this 16 KiB bitmap stays in cache where a
// miss in a map of every parent key (100k sessions) did not (issue 17).
// Bits are only set, so a parent whose last child left stays a false
// positive (one map lookup) until the filter is rebuilt from the map, once
// it has taken in more parents than twice those there are now.
type parentFilter struct {
	seed  maphash.Seed
	bits  []uint64
	added int // parents added since the last rebuild
}

const parentFilterBits = 1 << 17

func (f *parentFilter) reset() {
	f.seed = maphash.MakeSeed()
	f.bits = make([]uint64, parentFilterBits/64)
	f.added = 0
}

func (f *parentFilter) bit(key string) (word int, mask uint64) {
	h := maphash.String(f.seed, key) % parentFilterBits
	return int(h / 64), 1 << (h % 64)
}

// add files p, just given its first child; children is the index's map
// (mu held for writing).
func (f *parentFilter) add(p string, children map[string][]uint32) {
	if f.added++; f.added > 2*len(children)+1024 {
		clear(f.bits)
		f.added = 0
		for k := range children {
			f.set(k)
		}
		return // p is among them
	}
	f.set(p)
}

func (f *parentFilter) set(key string) {
	w, m := f.bit(key)
	f.bits[w] |= m
}

// mayHave is false only for a key with no children (mu held).
func (f *parentFilter) mayHave(key string) bool {
	w, m := f.bit(key)
	return f.bits[w]&m != 0
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
	if slot, ok := ix.byKey[key]; ok {
		return ix.slots[slot]
	}
	return nil
}

// BySessionID returns the entries whose sessionId is id, in the order they
// were indexed.
func (ix *Index) BySessionID(id string) []*Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	first, ok := ix.bySessionID[id]
	if !ok {
		return []*Entry{}
	}
	more := ix.sharedIDs[id]
	out := make([]*Entry, 0, 1+len(more))
	out = append(out, ix.slots[first])
	for _, slot := range more {
		out = append(out, ix.slots[slot])
	}
	return out
}

// IsChild reports whether child's lineage names parent.
func (ix *Index) IsChild(parent, child string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	slot, ok := ix.byKey[child]
	return ok && slices.Contains(ix.children[parent], slot)
}

// Children returns the sessions whose spawnedBy or parentSessionKey is
// parent, ordered by key.
func (ix *Index) Children(parent string) []*Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.entries(ix.children[parent])
}

// AppendChildren is Children appended to dst: a caller looking up the
// children of many sessions (a list page) reuses one slice.
func (ix *Index) AppendChildren(dst []*Entry, parent string) []*Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if !ix.parentsF.mayHave(parent) {
		return dst // most sessions have no children
	}
	return ix.appendEntries(dst, ix.children[parent])
}

func (ix *Index) entries(slots []uint32) []*Entry {
	return ix.appendEntries(make([]*Entry, 0, len(slots)), slots)
}

func (ix *Index) appendEntries(dst []*Entry, slots []uint32) []*Entry {
	for _, slot := range slots {
		dst = append(dst, ix.slots[slot])
	}
	return dst
}

// Each calls fn for entries newest first until fn returns false. fn runs
// under the index read lock and must not call back into the index.
func (ix *Index) Each(fn func(*Entry) bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	ix.order.Ascend(func(slot uint32) bool {
		return fn(ix.slots[slot])
	})
}

// EachLabeled is Each over the entries whose label is label only: a list
// filtered by label costs its matches, not the whole index.
func (ix *Index) EachLabeled(label string, fn func(*Entry) bool) {
	ix.mu.RLock()
	es := ix.entries(ix.byLabel[label])
	ix.mu.RUnlock()
	eachNewest(es, fn)
}

func eachNewest(es []*Entry, fn func(*Entry) bool) {
	slices.SortFunc(es, func(a, b *Entry) int {
		switch {
		case newer(a, b):
			return -1
		case newer(b, a):
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

// searchSortMax is the most candidates EachSearch sorts; past it, walking
// the order and skipping non-candidates is cheaper and stops early.
var searchSortMax = 4096

// EachSearch is Each over the entries that MatchesSearch(needle), needle a
// SearchNeedle:
// the search signatures pick the candidates, so a search matching few
// sessions costs about its candidates, not the whole index. A needle
// shorter than three bytes has no trigram to pick by and walks every entry.
// fn runs under the index read lock and must not call back into the index.
func (ix *Index) EachSearch(needle string, fn func(*Entry) bool) {
	q, ok := needleSignature(needle)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if !ok {
		ix.order.Ascend(func(slot uint32) bool {
			e := ix.slots[slot]
			return !e.MatchesSearch(needle) || fn(e)
		})
		return
	}
	cands := ix.search.candidates(q)
	n := 0
	for _, w := range cands {
		n += bits.OnesCount64(w)
	}
	if n > searchSortMax {
		ix.order.Ascend(func(slot uint32) bool {
			if cands[slot>>6]&(1<<(slot&63)) == 0 {
				return true
			}
			e := ix.slots[slot]
			return !e.MatchesSearch(needle) || fn(e)
		})
		return
	}
	var es []*Entry
	for w, word := range cands {
		for word != 0 {
			slot := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if slot < len(ix.slots) {
				if e := ix.slots[slot]; e != nil && e.MatchesSearch(needle) {
					es = append(es, e)
				}
			}
		}
	}
	eachNewest(es, fn)
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
