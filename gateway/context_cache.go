package gateway

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// A turn's context is every entry from the session's compaction point to
// the transcript's end, and reading it afresh made each turn's bus cost
// grow with the transcript. The gateway keeps instead, per live session,
// the context its last run read (ctxSnap), and a run reads only what was
// appended since, checking first that the entry the snapshot ends with is
// still there, at the same stream sequence, with the same bytes. Appends
// are compare-and-sets on the subject's last sequence, so that entry being
// unchanged means every entry before it is too; a reset or a rewrite
// (delete, append again) gives every entry a new sequence. Anything else
// the snapshot cannot vouch for (a compaction entry among the new ones, a
// transcript shorter than the snapshot, a recreated stream, a context
// that a fresh read would cut short) makes the run read afresh.

// ctxSnap is one session's context as a run read it. It is never changed
// once cached: runs share its slices and map read-only.
type ctxSnap struct {
	gen      uint64 // the transcript stream's generation it was read in
	end      uint64 // the transcript's length it was read at
	lastSeq  uint64 // stream sequence of entry end-1
	lastData []byte // entry end-1's bytes
	entries  []transcripts.Entry
	latest   *compactionEntry
	start    uint64
	// span is the estimate of every entry from start to end, those the
	// context leaves out (older compaction entries) included: what a
	// fresh read weighs before it may stop early (loadFresh)
	span int64
	// ests are the entries' estimates, in their order; used is what
	// estimateUsed makes of the entries without the system prompt, and
	// recorded says an entry carried the provider's count
	ests     []int64
	used     int64
	recorded bool
	cost     int // bytes accounted to it
	// grown is set once a snapshot made from this one appended to its
	// slices in place: any other must copy them (runs read them meanwhile,
	// but never past their own length)
	grown atomic.Bool
}

// estimate is entry n's estimate if the snapshot holds it: the entries
// after the first (a compaction entry, perhaps) are in number order.
func (s *ctxSnap) estimate(n uint64) (int64, bool) {
	if s == nil || len(s.entries) == 0 {
		return 0, false
	}
	if s.entries[0].N == n {
		return s.ests[0], true
	}
	rest := s.entries[1:]
	i := sort.Search(len(rest), func(i int) bool { return rest[i].N >= n })
	if i < len(rest) && rest[i].N == n {
		return s.ests[i+1], true
	}
	return 0, false
}

// extend is the snapshot with entries fresh (none of them a compaction
// entry) appended, their estimates ests, and span the new span. The first
// extension of a snapshot appends to its slices in place; later ones copy.
func (s *ctxSnap) extend(fresh []transcripts.Entry, ests []int64, span int64) *ctxSnap {
	next := &ctxSnap{gen: s.gen, latest: s.latest, start: s.start, span: span, cost: s.cost}
	if s.grown.CompareAndSwap(false, true) {
		next.entries = append(s.entries, fresh...)
		next.ests = append(s.ests, ests...)
	} else {
		next.entries = append(slices.Clone(s.entries), fresh...)
		next.ests = append(slices.Clone(s.ests), ests...)
	}
	next.used, next.recorded = s.used, s.recorded
	for i, e := range fresh {
		next.cost += next.entryCost(e)
		if n := recordedContext(e.Data); n > 0 {
			next.used, next.recorded = n, true // the provider's count from here
		} else {
			next.used += ests[i]
		}
	}
	last := fresh[len(fresh)-1]
	next.end, next.lastSeq, next.lastData = last.N+1, last.Seq, last.Data
	return next
}

// snapEntryOverhead is what one cached entry costs besides its bytes: the
// Entry itself and an estimate of its slot in the estimates map.
const snapEntryOverhead = int(unsafe.Sizeof(transcripts.Entry{})) + 32

// snapOverhead is a snapshot's fixed cost besides its key and entries.
const snapOverhead = int(unsafe.Sizeof(ctxSnap{})+unsafe.Sizeof(ctxNode{})) + 64

func (s *ctxSnap) entryCost(e transcripts.Entry) int { return len(e.Data) + snapEntryOverhead }

type ctxNode struct {
	key        string
	snap       *ctxSnap
	prev, next *ctxNode
}

// ctxCache is a least-recently-used map of session contexts bounded by
// their bytes, safe for concurrent use.
type ctxCache struct {
	max int

	mu    sync.Mutex
	m     map[string]*ctxNode
	lru   ctxNode // sentinel: lru.next is the most recently used
	bytes int
	stats ContextCacheStats
}

// ContextCacheStats describes a gateway's cache of session contexts.
type ContextCacheStats struct {
	Sessions int // sessions whose context is held
	Entries  int // transcript entries held, over every session
	Bytes    int // bytes accounted: entries' bytes plus overheads
	MaxBytes int // the bound on Bytes (bus.contextCacheBytes)
	// Hits are contexts served from the cache plus the entries appended
	// since; Misses contexts read afresh with none held; Rebuilds
	// contexts read afresh because the one held could not be vouched for.
	Hits, Misses, Rebuilds uint64
	Evictions              uint64 // contexts dropped to stay under MaxBytes
	// EntriesRead counts the transcript entries runs fetched to build
	// their contexts, with the cache or without it (a hit fetches the new
	// entries and the one the snapshot ends with).
	EntriesRead uint64
}

func newCtxCache(maxBytes int) *ctxCache {
	c := &ctxCache{max: maxBytes, m: map[string]*ctxNode{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

func (c *ctxCache) unlink(n *ctxNode) { n.prev.next, n.next.prev = n.next, n.prev }

func (c *ctxCache) pushFront(n *ctxNode) {
	n.prev, n.next = &c.lru, c.lru.next
	c.lru.next.prev = n
	c.lru.next = n
}

// get is the session's snapshot read in generation gen, nil when none is.
func (c *ctxCache) get(key string, gen uint64) *ctxSnap {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[key]
	if !ok || n.snap.gen != gen {
		return nil
	}
	c.unlink(n)
	c.pushFront(n)
	return n.snap
}

// put keeps s as the session's snapshot (nil: drops the one held),
// evicting the least recently used to stay within the bound. A snapshot
// over half the bound is not kept: it would flush nearly everything.
func (c *ctxCache) put(key string, s *ctxSnap) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		c.remove(old)
	}
	if s == nil || s.cost+len(key) > c.max/2 {
		return
	}
	n := &ctxNode{key: key, snap: s}
	c.m[key] = n
	c.pushFront(n)
	c.bytes += s.cost + len(key)
	c.stats.Entries += len(s.entries)
	for c.bytes > c.max {
		c.remove(c.lru.prev)
		c.stats.Evictions++
	}
}

func (c *ctxCache) remove(n *ctxNode) {
	c.unlink(n)
	delete(c.m, n.key)
	c.bytes -= n.snap.cost + len(n.key)
	c.stats.Entries -= len(n.snap.entries)
}

// How a run had its context: from the cache (and what was appended since),
// afresh with none cached, afresh with the cached one not vouched for.
type ctxOutcome int

const (
	hit ctxOutcome = iota
	miss
	rebuild
)

func (c *ctxCache) count(o ctxOutcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o {
	case hit:
		c.stats.Hits++
	case miss:
		c.stats.Misses++
	case rebuild:
		c.stats.Rebuilds++
	}
}

func (c *ctxCache) snapshot() ContextCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Sessions, s.Bytes, s.MaxBytes = len(c.m), c.bytes, c.max
	return s
}

// ContextCacheStats reports the gateway's cache of session contexts: only
// EntriesRead when bus.contextCacheBytes is 0.
func (g *Gateway) ContextCacheStats() ContextCacheStats {
	var s ContextCacheStats
	if g.ctxCache != nil {
		s = g.ctxCache.snapshot()
	}
	s.EntriesRead = g.ctxReads.Load()
	return s
}
