package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

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
	// 10,000-entry session again for each was most of its CPU
	est map[uint64]int64
}

// estimate is an entry's token estimate, computed once.
func (c *turnContext) estimate(e transcripts.Entry) int64 {
	if v, ok := c.est[e.N]; ok {
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

// loadContext reads the turn's context through the transcript index,
// walking back from the end in pages until it reaches the first entry the
// latest compaction kept, or the start, or holds far more than the window
// (the session then needs compacting, which reads the rest itself).
func (r *run) loadContext(ctx context.Context) (*turnContext, error) {
	limits := r.g.cfg.ModelLimits(r.modelRef())
	tc := &turnContext{limits: limits, reserve: r.g.cfg.Agents.Defaults.Compaction.Reserve(limits.ContextWindow)}
	var read []transcripts.Entry // newest page first, then older ones
	var est int64
	page, end, err := r.g.tr.Tail(ctx, r.enc, contextPage, 0)
	if err != nil {
		return nil, fmt.Errorf("read context: %w", err)
	}
	tc.end = end
	lowest := end
	for first := true; lowest > 0; first = false {
		if !first {
			from := lowest - min(lowest, contextPage)
			if page, err = r.g.tr.Read(ctx, r.enc, from, lowest); err != nil {
				return nil, fmt.Errorf("read context: %w", err)
			}
		}
		if len(page) == 0 {
			break
		}
		read = append(page, read...)
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
		tc.entries = append(tc.entries, transcripts.Entry{N: tc.latest.N, Data: entryAt(read, tc.latest.N).Data})
	} else if len(read) > 0 {
		tc.start = read[0].N
	}
	for _, e := range read {
		if e.N >= tc.start && !isCompaction(e.Data) {
			tc.entries = append(tc.entries, e)
		}
	}
	tc.used = tc.estimateUsed(tc.entries, r.req.ExtraSystemPrompt)
	return tc, nil
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
	var after int64
	for i := len(entries) - 1; i >= 0; i-- {
		if n := recordedContext(entries[i].Data); n > 0 && !isCompaction(entries[i].Data) {
			return n + after
		}
		after += c.estimate(entries[i])
	}
	return after + runtime.EstimateText(len(system))
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
