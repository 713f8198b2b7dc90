package handlers

import (
	"context"
	"encoding/json"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers/rules"
	"github.com/sessionbus/sessionbus/handlers/sanitize"
)

// sessions_history reads at most this many transcript entries per call. The
// reference leaves the gateway's default page unconfirmed; the 80 KiB cap
// bounds the reply anyway, and this bounds the read (docs/tools.md).
const (
	historyDefaultLimit = 200
	historyMaxLimit     = 1000
)

type historyResult struct {
	SessionKey       string            `json:"sessionKey"`
	Messages         []json.RawMessage `json:"messages"`
	Truncated        bool              `json:"truncated"`
	DroppedMessages  bool              `json:"droppedMessages"`
	ContentTruncated bool              `json:"contentTruncated"`
	ContentRedacted  bool              `json:"contentRedacted"`
	Bytes            int               `json:"bytes"`
	Offset           *int              `json:"offset,omitempty"`
	NextOffset       *int              `json:"nextOffset,omitempty"`
	HasMore          *bool             `json:"hasMore,omitempty"`
	TotalMessages    *int              `json:"totalMessages,omitempty"`
}

func sessionsHistory(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error) {
	ref, err := p.RequiredString("sessionKey")
	if err != nil {
		return nil, err
	}
	if err := rules.ValidateSessionKeyInput(ref); err != nil {
		return nil, err
	}
	limit, hasLimit, err := p.PositiveInt("limit")
	if err != nil {
		return nil, err
	}
	if !hasLimit {
		limit = historyDefaultLimit
	}
	limit = min(limit, historyMaxLimit)
	offset, paged, err := p.NonNegativeInt("offset")
	if err != nil {
		return nil, err
	}
	includeTools, _, err := p.Bool("includeTools")
	if err != nil {
		return nil, err
	}
	res, f := d.resolveVisible(ctx, r, ref, rules.ActionHistory)
	if f != nil {
		return f, nil
	}
	entries, total, err := d.Transcripts.Tail(ctx, bus.EncodeKey(res.key), limit, uint64(offset))
	if err != nil {
		return nil, err
	}
	view := d.sanitizeEntries(entries, includeTools, paged)
	out := &historyResult{SessionKey: res.displayKey}
	items := make([]json.RawMessage, len(view))
	for i, m := range view {
		items[i] = m.raw
		out.ContentTruncated = out.ContentTruncated || m.truncated
		out.ContentRedacted = out.ContentRedacted || m.redacted
	}
	kept, dropped, _, size := sanitize.CapByJSONBytes(items, sanitize.HistoryMaxBytes)
	out.Messages, out.DroppedMessages, out.Bytes = kept, dropped, size
	out.Truncated = out.DroppedMessages || out.ContentTruncated
	if paged {
		// the cap keeps a suffix (or one placeholder carrying the replaced
		// message's seq), so the oldest kept message is known by position
		oldest := uint64(0)
		if len(kept) > 0 && len(view) > 0 {
			oldest = view[max(len(view)-len(kept), 0)].seq
		}
		paginate(out, offset, int(total), len(entries), int(oldest))
	}
	return out, nil
}

// paginate recomputes the page metadata after filtering and capping:
// the next page starts right before the oldest message actually returned.
func paginate(out *historyResult, offset, total, read, oldestSeq int) {
	out.Offset, out.TotalMessages = &offset, &total
	var next int
	if oldestSeq > 0 {
		next = max(offset, total-oldestSeq+1)
	} else {
		next = min(offset+read, total) // every row of the page was filtered out
	}
	more := next < total
	out.HasMore = &more
	if more {
		out.NextOffset = &next
	}
}
