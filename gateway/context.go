package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// contextPage is how many entries one read of a turn's context fetches,
// walking back from the transcript's end.
const contextPage = 256

// turnContext is the model's context for one turn: the latest compaction
// entry, if any, then every entry from the first one it kept to the end.
type turnContext struct {
	// entries are the context, oldest first: the compaction entry first
	// when there is one
	entries []transcripts.Entry
	// latest is the newest compaction entry; nil when none was read
	latest *compactionEntry
	// start is the number of the first entry the context holds besides
	// the compaction entry (its firstKeptEntry, or 0)
	start uint64
	// end is the transcript's length the context was read at
	end uint64
	// complete: every entry from start was read (reading stops early
	// once the context is far past the window: compaction reads the rest)
	complete bool
	used     int64 // estimated tokens, corrected by the latest usage
	limits   config.ModelLimits
	reserve  int64
	// est keeps each entry's estimate by number: a compaction weighs
	// every entry several times (fit, cut, chunks), and decoding a
	// 10,000-entry session again for each was most of its CPU; base
	// holds those of a cached context, shared read-only with other runs
	est  map[uint64]int64
	base *ctxSnap
}

// estimate is an entry's token estimate, computed once.
func (c *turnContext) estimate(e transcripts.Entry) int64 {
	if v, ok := c.est[e.N]; ok {
		return v
	}
	if v, ok := c.base.estimate(e.N); ok {
		return v
	}
	v := runtime.EstimateTokens(e.Data)
	if c.est == nil {
		c.est = map[uint64]int64{}
	}
	c.est[e.N] = v
	return v
}

// budget is what the context may hold: the window less the reply reserve.
func (c *turnContext) budget() int64 { return c.limits.ContextWindow - c.reserve }

// fits reports whether the next request fits the model's window.
func (c *turnContext) fits() bool { return c.used <= c.budget() }

// add appends an entry written after the context was read (the prompt).
func (c *turnContext) add(e transcripts.Entry) {
	if c == nil {
		return
	}
	c.entries = append(c.entries, e)
	c.end = max(c.end, e.N+1)
	c.used += c.estimate(e)
}

// history is the context as the runtime is given it (nil: none).
func (c *turnContext) history() []json.RawMessage {
	if c == nil {
		return nil
	}
	out := make([]json.RawMessage, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e.Data)
	}
	return out
}

// compactionEntry is the part of a compaction entry the context needs.
type compactionEntry struct {
	N               uint64 `json:"-"`
	Type            string `json:"type"`
	Summary         string `json:"summary"`
	FirstKeptEntry  uint64 `json:"firstKeptEntry"`
	CompactionCount int64  `json:"compactionCount"`
	OperationID     string `json:"operationId"`
}

// parseCompaction reads a compaction entry; nil for any other entry.
func parseCompaction(e transcripts.Entry) *compactionEntry {
	if !isCompaction(e.Data) {
		return nil
	}
	var c compactionEntry
	if json.Unmarshal(e.Data, &c) != nil || c.Type != "compaction" || c.FirstKeptEntry > e.N {
		return nil
	}
	c.N = e.N
	return &c
}

// isCompaction is a cheap test before the decode: most entries are not.
func isCompaction(data []byte) bool {
	var h struct {
		Type string `json:"type"`
	}
	return jsonHas(data, `"compaction"`) && json.Unmarshal(data, &h) == nil && h.Type == "compaction"
}

func jsonHas(data []byte, s string) bool { return bytes.Contains(data, []byte(s)) }

// modelRef is the turn's model as a catalog ref: the session's override
// (with its provider), else the agent's configured model.
func (r *run) modelRef() string {
	if r.sess != nil {
		if m := r.sess.Rares().ModelOverride; m != "" {
			if p := r.sess.Rares().ProviderOverride; p != "" {
				return p + "/" + m
			}
			return m
		}
	}
	return r.g.cfg.AgentModel(r.req.AgentID)
}

// loadContext reads the turn's context: through the gateway's cache of
// session contexts when it has one (context_cache.go), else afresh.
func (r *run) loadContext(ctx context.Context) (*turnContext, error) {
	limits := r.g.cfg.ModelLimits(r.modelRef())
	reserve := r.g.cfg.Agents.Defaults.Compaction.Reserve(limits.ContextWindow)
	c := r.g.ctxCache
	if c == nil {
		tc, _, read, err := r.loadFresh(ctx, limits, reserve)
		r.g.ctxReads.Add(uint64(read))
		return tc, err
	}
	gen := r.g.tr.Generation()
	held := c.get(r.req.SessionKey, gen)
	if held != nil {
		tc, snap, read, err := r.loadSince(ctx, held, limits, reserve)
		r.g.ctxReads.Add(uint64(read))
		if err != nil {
			return nil, err
		}
		if tc != nil {
			c.count(hit)
			c.put(r.req.SessionKey, snap)
			return tc, nil
		}
		c.count(rebuild)
	} else {
		c.count(miss)
	}
	tc, snap, read, err := r.loadFresh(ctx, limits, reserve)
	r.g.ctxReads.Add(uint64(read))
	if err != nil {
		return nil, err
	}
	if snap != nil {
		snap.gen = gen
	}
	c.put(r.req.SessionKey, snap) // nil: nothing to keep, and drop what was held
	return tc, nil
}

// loadSince is the context of held plus the entries appended since it was
// read, which it fetches with the entry held ends with. tc is nil when
// held cannot be vouched for (a context read afresh might differ); snap
// is the context to keep; read counts the entries fetched.
func (r *run) loadSince(ctx context.Context, held *ctxSnap, limits config.ModelLimits, reserve int64) (tc *turnContext, snap *ctxSnap, read int, err error) {
	es, err := r.g.tr.Read(ctx, r.enc, held.end-1, math.MaxUint64)
	if err != nil {
		return nil, nil, len(es), fmt.Errorf("read context: %w", err)
	}
	read = len(es)
	// the entry held ends with, unchanged: every entry before it is too
	if len(es) == 0 || es[0].N != held.end-1 || es[0].Seq != held.lastSeq || !bytes.Equal(es[0].Data, held.lastData) {
		return nil, nil, read, nil
	}
	fresh := es[1:]
	if len(fresh) == 0 && held.span <= 2*limits.ContextWindow {
		return held.turnContext(limits, reserve, r.req.ExtraSystemPrompt), held, read, nil
	}
	span := held.span
	ests := make([]int64, len(fresh))
	for i, e := range fresh {
		if isCompaction(e.Data) {
			return nil, nil, read, nil // the context starts elsewhere now
		}
		ests[i] = runtime.EstimateTokens(e.Data)
		span += ests[i]
	}
	if span > 2*limits.ContextWindow {
		// a fresh read stops early this far past the window, and the
		// compaction that follows reads the rest its own way
		return nil, nil, read, nil
	}
	next := held.extend(fresh, ests, span)
	return next.turnContext(limits, reserve, r.req.ExtraSystemPrompt), next, read, nil
}

// turnContext is a run's own context over the snapshot: its entries and
// estimates are shared, so the run's additions (its prompt) and changes
// (a trim, a compaction) go to copies.
func (s *ctxSnap) turnContext(limits config.ModelLimits, reserve int64, system string) *turnContext {
	n := len(s.entries)
	tc := &turnContext{entries: s.entries[:n:n], latest: s.latest, start: s.start, end: s.end, complete: true,
		limits: limits, reserve: reserve, base: s}
	tc.used = s.used
	if !s.recorded {
		tc.used += runtime.EstimateText(len(system))
	}
	return tc
}

// loadFresh reads the turn's context through the transcript index,
// walking back from the end in pages until it reaches the first entry the
// latest compaction kept, or the start, or holds far more than the window
// (the session then needs compacting, which reads the rest itself). snap
// is the context to cache (nil when it was cut short or is empty); read
// counts the entries fetched.
func (r *run) loadFresh(ctx context.Context, limits config.ModelLimits, reserve int64) (tc *turnContext, snap *ctxSnap, read int, err error) {
	tc = &turnContext{limits: limits, reserve: reserve}
	var got []transcripts.Entry // newest page first, then older ones
	var est int64
	page, end, err := r.g.tr.Tail(ctx, r.enc, contextPage, 0)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read context: %w", err)
	}
	tc.end = end
	lowest := end
	for first := true; lowest > 0; first = false {
		if !first {
			from := lowest - min(lowest, contextPage)
			if page, err = r.g.tr.Read(ctx, r.enc, from, lowest); err != nil {
				return nil, nil, len(got), fmt.Errorf("read context: %w", err)
			}
		}
		if len(page) == 0 {
			break
		}
		got = append(page, got...)
		lowest = page[0].N
		for i := len(page) - 1; i >= 0 && tc.latest == nil; i-- {
			tc.latest = parseCompaction(page[i])
		}
		if tc.latest != nil && lowest <= tc.latest.FirstKeptEntry {
			break
		}
		for _, e := range page {
			est += tc.estimate(e)
		}
		if tc.latest == nil && est > 2*limits.ContextWindow {
			break // far too long: compaction reads the rest
		}
	}
	tc.complete = lowest == 0 || (tc.latest != nil && lowest <= tc.latest.FirstKeptEntry)
	if tc.latest != nil {
		tc.start = tc.latest.FirstKeptEntry
		tc.entries = append(tc.entries, entryAt(got, tc.latest.N))
	} else if len(got) > 0 {
		tc.start = got[0].N
	}
	for _, e := range got {
		if e.N >= tc.start && !isCompaction(e.Data) {
			tc.entries = append(tc.entries, e)
		}
	}
	tc.used = tc.estimateUsed(tc.entries, r.req.ExtraSystemPrompt)
	if n := len(tc.entries); n > 0 {
		tc.entries = tc.entries[:n:n] // the run's additions go to a copy
	}
	if tc.complete && len(got) > 0 && got[len(got)-1].N == end-1 {
		if snap = tc.snap(got, end); snap.span > 2*limits.ContextWindow {
			snap = nil // the next run reads afresh anyway (loadSince)
		}
	}
	return tc, snap, len(got), nil
}

// snap is a complete context, read as got (the entries fetched, oldest
// first, ending with entry end-1), as the cache keeps it.
func (tc *turnContext) snap(got []transcripts.Entry, end uint64) *ctxSnap {
	last := got[len(got)-1]
	s := &ctxSnap{end: end, lastSeq: last.Seq, lastData: last.Data, entries: tc.entries, latest: tc.latest, start: tc.start,
		ests: make([]int64, len(tc.entries)), cost: snapOverhead}
	for _, e := range got {
		if e.N >= tc.start {
			s.span += tc.estimate(e)
		}
	}
	for i, e := range tc.entries {
		s.ests[i] = tc.estimate(e)
		s.cost += s.entryCost(e)
	}
	s.used, s.recorded = tc.usedOf(tc.entries)
	return s
}

func entryAt(es []transcripts.Entry, n uint64) transcripts.Entry {
	for _, e := range es {
		if e.N == n {
			return e
		}
	}
	return transcripts.Entry{}
}

// estimateUsed is the context's size in tokens: the provider's count for
// the prompt and reply of the newest turn that reported usage, plus the
// estimate of every entry after it; with no usage, the estimate of all
// of them and of the system prompt.
func (c *turnContext) estimateUsed(entries []transcripts.Entry, system string) int64 {
	used, recorded := c.usedOf(entries)
	if !recorded {
		used += runtime.EstimateText(len(system))
	}
	return used
}

// usedOf is estimateUsed without the system prompt; recorded reports that
// an entry carried the provider's count (the system prompt is in it).
func (c *turnContext) usedOf(entries []transcripts.Entry) (used int64, recorded bool) {
	var after int64
	for i := len(entries) - 1; i >= 0; i-- {
		if n := recordedContext(entries[i].Data); n > 0 && !isCompaction(entries[i].Data) {
			return n + after, true
		}
		after += c.estimate(entries[i])
	}
	return after, false
}

// recordedContext is the context size a reply entry recorded from its
// provider's usage (the marker's context field); 0 when it has none.
func recordedContext(data []byte) int64 {
	if !jsonHas(data, `"context"`) {
		return 0
	}
	var m struct {
		M *marker `json:"__sessionbus"`
	}
	if json.Unmarshal(data, &m) != nil || m.M == nil {
		return 0
	}
	return m.M.Context
}

// fitContext makes the context fit the model's window before the turn's
// request: a run whose earlier attempt compacted finds that compaction
// (and records its signal again, a no-op by its dedupe key); otherwise a
// context that does not fit is compacted. When compaction is impossible
// or fails (no summarizer, an empty summary, a provider error), the turn
// runs with the newest entries that fit and the transcript is unchanged.
func (r *run) fitContext(ctx context.Context) error {
	tc := r.tc
	if tc == nil || tc.fits() {
		return nil
	}
	if _, ok := r.g.summarizer(r.req.AgentID); ok && r.compacted == nil {
		out, err := r.compact(ctx, tc, compactOptions{auto: true})
		if err == nil {
			r.tc = out
			if out.fits() {
				return nil
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		} else {
			r.g.log.Warn("gateway: auto-compaction failed; the turn gets the newest entries that fit", "session", r.req.SessionKey, "run", r.req.RunID, "err", err)
		}
	}
	r.tc = r.tc.trimmed()
	return nil
}

// earlierCompaction notes a compaction an earlier attempt of the run
// appended (in mine), and records its signal again (a no-op by its dedupe
// key when that attempt recorded it).
func (r *run) earlierCompaction(ctx context.Context, mine []transcripts.Entry) {
	for _, e := range mine {
		if c := parseCompaction(e); c != nil && hasPart([]transcripts.Entry{e}, r.req.RunID, compactionPart) {
			r.compacted = c
			r.recordCompacted(ctx, c, 0, true)
		}
	}
}

// trimmed is the context cut to its newest entries that fit the budget
// (the newest one always), after the compaction entry if there is one.
func (c *turnContext) trimmed() *turnContext {
	out := *c
	var head []transcripts.Entry
	body := c.entries
	if len(body) > 0 && isCompaction(body[0].Data) {
		head, body = body[:1], body[1:]
	}
	room := c.budget() - c.estimateUsed(head, "")
	i := len(body)
	var size int64
	for i > 0 {
		est := c.estimate(body[i-1])
		if i < len(body) && size+est > room {
			break
		}
		size += est
		i--
	}
	out.entries = append(append([]transcripts.Entry{}, head...), body[i:]...)
	out.used = c.estimateUsed(out.entries, "")
	return &out
}
