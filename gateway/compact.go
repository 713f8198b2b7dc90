package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/signals"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// errNothingToCompact: every entry of the context is in the kept tail.
var errNothingToCompact = errors.New("nothing to compact: every entry since the last compaction is within the kept tail (agents.defaults.compaction.keepRecentTokens)")

// compactionPart is the run part a compaction entry is appended as.
const compactionPart = "compaction"

// summarizer is the runtime of the run's agent when it can write a
// compaction summary.
func (g *Gateway) summarizer(agentID string) (runtime.Summarizer, bool) {
	return g.summarizerOf(g.runtimes[agentID])
}

func (g *Gateway) summarizerOf(rt runtime.Runtime) (runtime.Summarizer, bool) {
	s, ok := rt.(runtime.Summarizer)
	if !ok || !s.CanSummarize() {
		return nil, false
	}
	return s, true
}

// compactOptions is what started a compaction.
type compactOptions struct {
	auto         bool   // the next request would not fit (else on demand)
	instructions string // an operator's extra focus
}

// compact summarizes the context's entries before a kept tail with the
// session's model and appends one compaction entry, which marks where the
// model's context now starts; every older entry stays in the transcript.
// The entry is one append with the run's own message id, so a compaction
// cut short leaves it whole or not at all, and a redelivered run finds it
// (and does not compact again). It returns the context after it.
func (r *run) compact(ctx context.Context, tc *turnContext, o compactOptions) (*turnContext, error) {
	sum, ok := r.g.summarizer(r.req.AgentID)
	if !ok {
		return nil, fmt.Errorf("agent %s cannot compact: its runtime has no model to summarize with (openai, or script with script.summary)", r.req.AgentID)
	}
	body, err := r.contextBody(ctx, tc)
	if err != nil {
		return nil, err
	}
	cp := r.g.cfg.Agents.Defaults.Compaction
	keep := min(cp.KeepRecentTokens, tc.budget()/2)
	cut := cutPoint(tc, body, keep)
	if cut == 0 {
		return nil, errNothingToCompact
	}
	prev := ""
	if tc.latest != nil {
		prev = tc.latest.Summary
	}
	summary, err := r.summarize(ctx, sum, tc, body[:cut], prev, o.instructions)
	if err != nil {
		return nil, err
	}
	count := int64(0)
	if r.sess != nil {
		count = r.sess.Rares().CompactionCount
	}
	if tc.latest != nil {
		count = max(count, tc.latest.CompactionCount)
	}
	opID := "cmp-" + r.req.RunID
	kept := body[cut]
	entry := map[string]any{
		"type": "compaction", "id": opID, "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"summary": summary, "firstKeptEntryId": entryID(kept), "tokensBefore": tc.used,
		// sessionbus's own: the kept entry's number (entries need not
		// carry ids), the session's count after it, the operation
		"firstKeptEntry": kept.N, "compactionCount": count + 1, "operationId": opID,
		runMarker: marker{Run: r.req.RunID, Part: compactionPart},
	}
	data, _ := bus.Marshal(entry)
	if err := r.appendPart(ctx, compactionPart, data, nil); err != nil {
		return nil, err
	}
	n := r.cur.Len() - 1
	latest := &compactionEntry{N: n, Type: "compaction", Summary: summary, FirstKeptEntry: kept.N, CompactionCount: count + 1, OperationID: opID}
	r.compacted = latest
	r.recordCompacted(ctx, latest, tc.used, o.auto)
	out := *tc
	out.latest, out.start, out.complete = latest, kept.N, true
	out.entries = append([]transcripts.Entry{{N: n, Data: data}}, body[cut:]...)
	out.used = out.estimateUsed(out.entries, r.req.ExtraSystemPrompt)
	r.g.log.Info("gateway: session compacted", "session", r.req.SessionKey, "run", r.req.RunID,
		"summarized", cut, "kept", len(body)-cut, "tokensBefore", tc.used, "tokensAfter", out.used)
	return &out, nil
}

// contextBody is every entry of the context but the compaction entry,
// reading what loadContext left unread (a session far longer than the
// window) forward in pages.
func (r *run) contextBody(ctx context.Context, tc *turnContext) ([]transcripts.Entry, error) {
	var body []transcripts.Entry
	for _, e := range tc.entries {
		if !isCompaction(e.Data) {
			body = append(body, e)
		}
	}
	if tc.complete {
		return body, nil
	}
	from := uint64(0)
	if tc.latest != nil {
		from = tc.latest.FirstKeptEntry
	}
	to := tc.end
	if len(body) > 0 {
		to = body[0].N
	}
	var older []transcripts.Entry
	for from < to {
		page, err := r.g.tr.Read(ctx, r.enc, from, min(to, from+contextPage))
		if err != nil {
			return nil, fmt.Errorf("read context: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if !isCompaction(e.Data) {
				older = append(older, e)
			}
		}
		from = page[len(page)-1].N + 1
	}
	return append(older, body...), nil
}

// cutPoint is the index of the first entry kept verbatim: the newest
// entries holding about keep tokens, the newest one (the prompt) always,
// and never a tool result without the call before it. 0: nothing to
// summarize.
func cutPoint(tc *turnContext, body []transcripts.Entry, keep int64) int {
	if len(body) < 2 {
		return 0
	}
	cut := len(body) - 1
	acc := tc.estimate(body[cut])
	for cut > 0 && acc < keep {
		cut--
		acc += tc.estimate(body[cut])
	}
	for cut > 0 && isToolResult(body[cut].Data) {
		cut--
	}
	return cut
}

func isToolResult(data []byte) bool {
	var m struct {
		Role    string `json:"role"`
		Message *struct {
			Role string `json:"role"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	if m.Message != nil {
		m.Role = m.Message.Role
	}
	return m.Role == "toolResult" || m.Role == "tool"
}

// entryID is an entry's OpenClaw id, else its number.
func entryID(e transcripts.Entry) string {
	var m struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(e.Data, &m) == nil && m.ID != "" {
		return m.ID
	}
	return fmt.Sprintf("entry-%d", e.N)
}

// summarize asks the model for the summary of entries, in as many calls
// as the window needs: each call gets the conversation that fits beside
// the summary so far, which it merges into (OpenClaw's update prompt).
func (r *run) summarize(ctx context.Context, sum runtime.Summarizer, tc *turnContext, entries []transcripts.Entry, prev, instructions string) (string, error) {
	summary := prev
	for len(entries) > 0 {
		room := tc.budget() - runtime.SummaryOverhead - runtime.EstimateText(len(summary)+len(instructions))
		n, size := 0, int64(0)
		for n < len(entries) {
			est := tc.estimate(entries[n])
			if n > 0 && size+est > room {
				break
			}
			size += est
			n++
		}
		raw := make([]json.RawMessage, n)
		for i := range n {
			raw[i] = entries[i].Data
		}
		s, _, err := sum.Summarize(ctx, runtime.SummaryRequest{
			Model: r.model(), Conversation: runtime.SerializeConversation(raw),
			PreviousSummary: summary, Instructions: instructions,
		})
		if err != nil {
			return "", fmt.Errorf("compaction summary: %w", err)
		}
		if strings.TrimSpace(s) == "" {
			return "", errors.New("compaction summary: the model's reply was empty; the session was not compacted")
		}
		summary, entries = s, entries[n:]
	}
	return summary, nil
}

// recordCompacted appends `compacted` to the signal log (log only; its
// dedupe key makes a redelivered run's second record a no-op).
func (r *run) recordCompacted(ctx context.Context, c *compactionEntry, tokensBefore int64, auto bool) {
	if r.g.recorder == nil {
		return
	}
	sessionID := ""
	if r.sess != nil {
		sessionID = r.sess.SessionID
	}
	trigger := "manual"
	if auto {
		trigger = "auto"
	}
	_, err := r.g.recorder.Record(ctx, signals.Event{
		DedupeKey: "compacted:" + c.OperationID, SessionKey: r.req.SessionKey, SessionID: sessionID,
		AgentID: rules.FirstNonEmpty(r.req.AgentID, rules.AgentIDFromKey(r.req.SessionKey)),
		Kind:    signals.KindCompacted, ActorType: signals.ActorSystem, RunID: r.req.RunID,
		OccurredAt: time.Now().UnixMilli(), Summary: "session compacted",
		Payload: map[string]any{"trigger": trigger, "tokensBefore": tokensBefore, "firstKeptEntry": c.FirstKeptEntry, "compactionCount": c.CompactionCount},
	})
	if err != nil {
		r.g.log.Warn("gateway: recording compacted failed (the compaction stands)", "session", r.req.SessionKey, "err", err)
	}
}
