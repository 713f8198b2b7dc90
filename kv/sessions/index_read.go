package sessions

import (
	"context"
	"fmt"
	"slices"

	"github.com/sessionbus/sessionbus/kv/record"
)

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
	err := record.WaitFor(ctx, ix.changed, func() bool { return ix.applied >= rev }, func() error { return ix.err })
	if err != nil && err == ctx.Err() {
		return fmt.Errorf("session index behind (at %d, want %d): %w", ix.applied, rev, err)
	}
	return err
}

// WaitSearch waits until the trigram lists of the loaded entries are built
// (searches walk the order until then): what measures the whole index, its
// memory or its searches, waits on it after StartIndex.
func (ix *Index) WaitSearch(ctx context.Context) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return record.WaitFor(ctx, ix.changed, func() bool { return ix.searching }, func() error { return ix.err })
}

// Get returns the entry for key, or nil.
func (ix *Index) Get(key string) *Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if slot, ok := ix.byKey.get(key); ok {
		return ix.slots[slot]
	}
	return nil
}

// BySessionID returns the entries whose sessionId is id, in the order they
// were indexed.
func (ix *Index) BySessionID(id string) []*Entry {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	first, ok := ix.bySessionID.get(id)
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
	slot, ok := ix.byKey.get(child)
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

// Each calls fn for entries pinned first, then newest, until fn returns false. fn runs
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
// SearchNeedle. The trigram lists pick the candidates (once built: until
// then, for a second after a load of a million, it walks), so a search matching
// few sessions costs about its rarest trigram's list and its candidates,
// however many sessions there are. A needle shorter than three bytes has no
// trigram to pick by, and one made only of trigrams most sessions have
// narrows little: both walk the order, the latter skipping the sessions
// its bitmaps rule out. fn runs under the index read lock and must not call
// back into the index.
func (ix *Index) EachSearch(needle string, fn func(*Entry) bool) {
	grams, ok := needleTrigrams(needle)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if !ok || !ix.searching {
		ix.order.Ascend(func(slot uint32) bool {
			e := ix.slots[slot]
			return !e.MatchesSearch(needle) || fn(e)
		})
		return
	}
	cands, dense, ok := ix.search.candidates(grams)
	if !ok {
		ix.order.Ascend(func(slot uint32) bool {
			if !holdsAll(dense, slot) {
				return true
			}
			e := ix.slots[slot]
			return !e.MatchesSearch(needle) || fn(e)
		})
		return
	}
	if len(cands) > searchSortMax {
		in := make([]uint64, len(ix.slots)/64+1)
		for _, slot := range cands {
			in[slot>>6] |= 1 << (slot & 63)
		}
		ix.order.Ascend(func(slot uint32) bool {
			if in[slot>>6]&(1<<(slot&63)) == 0 {
				return true
			}
			e := ix.slots[slot]
			return !e.MatchesSearch(needle) || fn(e)
		})
		return
	}
	es := make([]*Entry, 0, len(cands))
	for _, slot := range cands {
		if e := ix.slots[slot]; e != nil && e.MatchesSearch(needle) {
			es = append(es, e)
		}
	}
	eachNewest(es, fn)
}

// Len is the number of indexed sessions.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.byKey.len()
}
