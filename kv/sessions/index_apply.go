package sessions

import (
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// change is one watched change made ready to file: the entry decoded,
// interned, packed, derived and (after the initial load) its search
// trigrams listed, all of which needs no lock, so readers wait only for
// commit.
type change struct {
	key   string
	e     *Entry    // nil: the key was deleted (or its value is corrupt)
	grams []trigram // e's searched trigrams; nil during the initial load
	rev   uint64
	skip  bool // an undecodable key: nothing to file
}

// apply files one change the watch brought (a put or a delete) in every
// lookup.
func (ix *Index) apply(ke jetstream.KeyValueEntry) {
	// Only the watch goroutine applies, so the intern table needs no
	// lock (recover clears it after that goroutine ended).
	c := ix.prepare(ke, &ix.intern, true)
	if c.skip {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.commit(&c)
	if c.rev > ix.applied {
		ix.applied = c.rev
	}
	ix.changed.Broadcast()
}

// prepare decodes ke into a change. live: a change after the initial
// load, which reuses the strings of the entry it replaces and lists its
// trigrams (the load sees each key once, so it skips the lookup and
// several goroutines can prepare at once, and it files the trigrams of
// every entry in one go at its end).
func (ix *Index) prepare(ke jetstream.KeyValueEntry, in *interner, live bool) change {
	key, err := bus.DecodeKey(ke.Key())
	if err != nil {
		ix.log.Warn("session index: undecodable key", "key", ke.Key(), "err", err)
		return change{skip: true}
	}
	c := change{key: key, rev: ke.Revision()}
	if ke.Operation() != jetstream.KeyValuePut {
		return c
	}
	e, err := ix.store.decodeWatched(ke.Value(), in)
	if err != nil {
		ix.log.Warn("session index: skipping corrupt entry", "key", key, "err", err)
		return c
	}
	e.Key = key
	in.entry(e)
	var prev *Entry
	if live {
		ix.mu.RLock()
		if slot, ok := ix.byKey.get(key); ok {
			prev = ix.slots[slot]
		}
		ix.mu.RUnlock()
	}
	pack(e, prev)
	if ix.derive != nil {
		e.Derived = ix.derive(e)
	}
	c.key, c.e = e.Key, e
	if live {
		c.grams = entryTrigrams(e)
	}
	return c
}

// commit files c in every lookup (mu held); the caller advances applied.
// During the initial load it leaves the trigram lists alone: filing ~70
// trigrams per entry one by one under the lock would hold up the load,
// and they are built in bulk once every entry is in (buildSearch).
func (ix *Index) commit(c *change) {
	key, e := c.key, c.e
	cell, had := ix.byKey.find(key)
	var slot uint32
	if had {
		slot = ix.byKey.cells[cell] - 1
	}
	switch {
	case had && e != nil:
		old := ix.slots[slot]
		ix.unlink(slot)
		if ix.searching && !sameSearchText(old, e) {
			ix.search.update(slot, entryTrigrams(old), c.grams, len(ix.slots))
		}
		ix.link(slot, e)
	case had:
		if ix.searching {
			ix.search.remove(slot, entryTrigrams(ix.slots[slot]), len(ix.slots))
		}
		ix.unlink(slot)
		ix.byKey.remove(key)
		ix.slots[slot] = nil
		ix.free = append(ix.free, slot)
	case e != nil:
		slot = ix.newSlot()
		if ix.searching {
			ix.search.add(slot, c.grams, len(ix.slots))
		}
		ix.link(slot, e)
		ix.byKey.add(cell, key, slot) // after link: the table reads the key from the slot's entry
	}
}

// reserve makes room for n more entries (mu held): the load knows from
// its first value how many follow, and the lookups grown step by step
// would be copied and rehashed ~20 times on the way to a million.
func (ix *Index) reserve(n int) {
	ix.slots = slices.Grow(ix.slots, n)
	ix.byKey.reserve(ix.byKey.len() + n)
	ix.bySessionID.reserve(ix.bySessionID.len() + n)
}

// newSlot takes a free slot or adds one.
func (ix *Index) newSlot() uint32 {
	if n := len(ix.free); n > 0 {
		slot := ix.free[n-1]
		ix.free = ix.free[:n-1]
		return slot
	}
	ix.slots = append(ix.slots, nil)
	return uint32(len(ix.slots) - 1)
}

// link files e under slot in every lookup but byKey and the trigrams.
func (ix *Index) link(slot uint32, e *Entry) {
	ix.slots[slot] = e
	if !ix.loading {
		ix.order.ReplaceOrInsert(slot)
	}
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
		if cell, taken := ix.bySessionID.find(id); taken {
			ix.sharedIDs[id] = append(ix.sharedIDs[id], slot)
		} else {
			ix.bySessionID.add(cell, id, slot)
		}
	}
}

// unlink undoes link for the entry in slot (still there: the order tree
// finds it by its fields).
func (ix *Index) unlink(slot uint32) {
	e := ix.slots[slot]
	if !ix.loading {
		ix.order.Delete(slot)
	}
	for _, p := range parents(e) {
		removeSlot(ix.children, p, slot)
	}
	if e.Label != "" {
		removeSlot(ix.byLabel, e.Label, slot)
	}
	if id := e.SessionID; id != "" {
		if first, _ := ix.bySessionID.get(id); first != slot {
			removeSlot(ix.sharedIDs, id, slot)
		} else if more := ix.sharedIDs[id]; len(more) > 0 {
			ix.bySessionID.set(id, more[0])
			removeSlot(ix.sharedIDs, id, more[0])
		} else {
			ix.bySessionID.remove(id)
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

// parents lists both lineage fields: OpenClaw matches a tree member by
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
