package handlers

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"unsafe"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Transcript entries never change once written, so what sessions_history
// makes of one (decoded, filtered, sanitized, redacted, truncated and
// re-encoded: entryView) depends only on its bytes, its entry number,
// whether the reply is paginated (the seq tag) and the redactor. Recomputing
// it was most of a history call's CPU; the worker keeps it
// instead, in a bounded LRU cache.
//
// The cache is keyed by stream sequence and the seq tag, and a hit is
// checked against the entry just fetched (its number, length and a 64-bit
// hash of its bytes), so a stream deleted and recreated (sequences start
// again at 1) or any other surprise costs a miss, never a wrong view. The
// redactor's fingerprint covers the redaction config: a different one
// empties the cache. includeTools is not part of the key: the view records
// whether the entry is a tool message and the filter is applied per call.

// historyCacheMaxBytes bounds one worker's cache: about 90,000 views of the
// ~250 B messages the benchmarks use, far more than the pages in use at
// once. There is no config key yet; see docs/performance.md.
const historyCacheMaxBytes = 32 << 20

// viewNodeOverhead is what one cached view costs besides its JSON: the
// node itself and an estimate of its map slot (key, pointer, bucket share).
const viewNodeOverhead = int(unsafe.Sizeof(viewNode{})) + 48

type viewKey struct {
	gen     uint64 // the transcript stream's generation (transcripts.Store.Generation)
	seq     uint64 // stream sequence of the entry
	withSeq bool   // the view carries __openclaw.seq (paginated reads)
}

type viewNode struct {
	key        viewKey
	n          uint64 // entry number the view was made from
	size       int    // entry length
	sum        uint64 // hash of the entry bytes
	cost       int    // bytes accounted to this node
	v          entryView
	prev, next *viewNode
}

// viewCache is a size-bounded LRU of entry views, safe for concurrent use.
type viewCache struct {
	max  int
	seed maphash.Seed

	mu    sync.Mutex
	fp    string // redactor fingerprint of every view held
	m     map[viewKey]*viewNode
	lru   viewNode // sentinel: lru.next is the most recently used
	bytes int
	stats HistoryCacheStats
}

// HistoryCacheStats describes a worker's sessions_history view cache.
type HistoryCacheStats struct {
	Entries   int    // views held
	Bytes     int    // bytes accounted: the views' JSON plus per-view overhead
	MaxBytes  int    // the bound on Bytes
	Hits      uint64 // entries served from the cache
	Misses    uint64 // entries projected on a call
	Evictions uint64 // views dropped to stay under MaxBytes
}

func newViewCache(maxBytes int) *viewCache {
	c := &viewCache{max: maxBytes, seed: maphash.MakeSeed()}
	c.resetLocked("")
	return c
}

func (c *viewCache) resetLocked(fp string) {
	c.fp = fp
	c.m = make(map[viewKey]*viewNode)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.bytes = 0
}

func (c *viewCache) unlink(n *viewNode) {
	n.prev.next, n.next.prev = n.next, n.prev
}

func (c *viewCache) pushFront(n *viewNode) {
	n.prev, n.next = &c.lru, c.lru.next
	c.lru.next.prev = n
	c.lru.next = n
}

// lookup fills views[i] for each entry held under fingerprint fp, sums[i]
// with every entry's hash, and returns the indices it could not fill.
func (c *viewCache) lookup(fp string, gen uint64, entries []transcripts.Entry, withSeq bool, views []entryView, sums []uint64) []int {
	for i, e := range entries {
		if e.Data != nil {
			sums[i] = maphash.Bytes(c.seed, e.Data)
		}
	}
	var missing []int
	c.mu.Lock()
	defer c.mu.Unlock()
	if fp != c.fp {
		c.resetLocked(fp)
	}
	for i, e := range entries {
		n, ok := c.m[viewKey{gen, e.Seq, withSeq}]
		// an entry not fetched (no Data: the read trusted has) is checked
		// by its number only; a fetched one by its bytes too
		if !ok || n.n != e.N || (e.Data != nil && (n.size != len(e.Data) || n.sum != sums[i])) {
			missing = append(missing, i)
			continue
		}
		views[i] = n.v
		c.unlink(n)
		c.pushFront(n)
	}
	c.stats.Hits += uint64(len(entries) - len(missing))
	c.stats.Misses += uint64(len(missing))
	return missing
}

// store keeps the views at the indices given, made under fingerprint fp,
// evicting the least recently used views to stay within the bound. A view
// over an eighth of the bound is not kept: it would flush too much.
func (c *viewCache) store(fp string, gen uint64, entries []transcripts.Entry, withSeq bool, views []entryView, sums []uint64, idx []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fp != c.fp {
		return // the redaction config changed while these were made
	}
	for _, i := range idx {
		e := entries[i]
		cost := len(views[i].msg.raw) + viewNodeOverhead
		if cost > c.max/8 {
			continue
		}
		k := viewKey{gen, e.Seq, withSeq}
		if old, ok := c.m[k]; ok { // a concurrent call, or a stale view
			c.unlink(old)
			c.bytes -= old.cost
		}
		n := &viewNode{key: k, n: e.N, size: len(e.Data), sum: sums[i], cost: cost, v: views[i]}
		c.m[k] = n
		c.pushFront(n)
		c.bytes += cost
		for c.bytes > c.max {
			old := c.lru.prev
			c.unlink(old)
			delete(c.m, old.key)
			c.bytes -= old.cost
			c.stats.Evictions++
		}
	}
}

func (c *viewCache) snapshot() HistoryCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes, s.MaxBytes = len(c.m), c.bytes, c.max
	return s
}

// has reports whether the cache holds the view of entry n at seq under the
// current redaction config: what lets a read skip fetching it.
func (c *viewCache) has(fp string, gen, seq, n uint64, withSeq bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[viewKey{gen, seq, withSeq}]
	return ok && fp == c.fp && v.n == n
}

// historyTail reads a page for sessions_history. With the view cache, the
// entries whose views it holds are not fetched at all (a transcript entry
// never changes, and a sequence names the same entry within one stream
// generation): a warm page costs the index reads only. Should a view be
// evicted between that check and its use, the page is read again whole.
func (d *Deps) historyTail(ctx context.Context, key string, limit int, offset uint64, includeTools, withSeq bool) ([]viewMessage, int, uint64, error) {
	enc := bus.EncodeKey(key)
	c := d.views
	if c == nil {
		entries, total, err := d.Transcripts.Tail(ctx, enc, limit, offset)
		return d.sanitizeEntries(entries, includeTools, withSeq), len(entries), total, err
	}
	fp, gen := d.Redactor.Fingerprint(), d.Transcripts.Generation()
	cached := func(seq, n uint64) bool { return c.has(fp, gen, seq, n, withSeq) }
	for range 2 {
		entries, total, err := d.Transcripts.TailCached(ctx, enc, limit, offset, cached)
		if err != nil {
			return nil, 0, 0, err
		}
		if views, ok := d.historyViews(entries, gen, includeTools, withSeq); ok {
			return views, len(entries), total, nil
		}
		cached = nil // a view went missing meanwhile: fetch everything
	}
	return nil, 0, 0, errors.New("sessions_history: the view cache lost entries it held twice in a row")
}

// historyViews is sanitizeEntries through the worker's view cache: the same
// messages, byte for byte, with only the entries not seen before projected.
// ok is false when an entry that was not fetched (no Data) has no view
// any more.
func (d *Deps) historyViews(entries []transcripts.Entry, gen uint64, includeTools, withSeq bool) ([]viewMessage, bool) {
	c := d.views
	fp := d.Redactor.Fingerprint()
	views := make([]entryView, len(entries))
	sums := make([]uint64, len(entries))
	missing := c.lookup(fp, gen, entries, withSeq, views, sums)
	for _, i := range missing {
		if entries[i].Data == nil {
			return nil, false
		}
	}
	for _, i := range missing {
		// project tool messages too, so the view serves either includeTools
		views[i] = d.viewEntry(entries[i], withSeq, false)
	}
	if len(missing) > 0 {
		c.store(fp, gen, entries, withSeq, views, sums, missing)
	}
	out := make([]viewMessage, 0, len(entries))
	for _, v := range views {
		if v.shows(includeTools) {
			out = append(out, v.msg)
		}
	}
	return out, true
}

// HistoryCacheStats reports the sessions_history view cache (zero when the
// tools were not started through Tools).
func (d *Deps) HistoryCacheStats() HistoryCacheStats {
	if d.views == nil {
		return HistoryCacheStats{}
	}
	return d.views.snapshot()
}

// ResetHistoryCache drops every cached view (the counters stay), so the next
// sessions_history call runs cold, as on a fresh worker: the benchmarks use
// it to measure that first call.
func (d *Deps) ResetHistoryCache() {
	if d.views == nil {
		return
	}
	d.views.mu.Lock()
	defer d.views.mu.Unlock()
	d.views.resetLocked(d.views.fp)
}
