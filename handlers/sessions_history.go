package handlers

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// sessions_history reads at most this many transcript entries per call.
// OpenClaw leaves the gateway's default page unconfirmed; the 80 KiB cap
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
	if f == nil {
		f = d.archivedHistory(ctx, res)
	}
	if f != nil {
		return d.redactResult(f) // it quotes the caller's key
	}
	view, read, total, err := d.historyTail(ctx, res.key, limit, uint64(offset), includeTools, paged)
	if transcripts.Transient(err) {
		// A JetStream leader moving, or writers racing on the index: the
		// read can succeed again in a moment, so say so (503) instead of
		// failing the call as an internal error.
		d.Log.Warn("sessions_history: transcript read failed, answering 503", "session", res.key, "err", err)
		return nil, bus.Errorf(bus.CodeUnavailable, "sessions_history: the transcript store is busy or electing a leader; retry")
	}
	if err != nil {
		return nil, err
	}
	// the messages are redacted one by one (and cached); the key is the
	// caller's own argument, echoed
	shown, _ := d.Redactor.ToolPayload(res.displayKey)
	return historyPage(shown, view, read, total, offset, paged).encode()
}

// historyPage builds the reply from the page's views: the 80 KiB cap, the
// flags and, for paginated reads, the page metadata. read is how many
// entries the page read, total the transcript's length.
func historyPage(displayKey string, view []viewMessage, read int, total uint64, offset int, paged bool) *historyResult {
	out := &historyResult{SessionKey: displayKey}
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
		paginate(out, offset, int(total), read, int(oldest))
	}
	return out
}

// encode writes the reply exactly as json.Marshal writes historyResult
// (TestHistoryEncodeMatchesMarshal), but copies the messages, which are
// already compact, HTML-safe JSON, instead of scanning them again: with the
// views cached, that scan (about 85 µs for a 50-message page) was most of
// the handler's own CPU.
func (h *historyResult) encode() (json.RawMessage, error) {
	key, err := json.Marshal(h.SessionKey)
	if err != nil {
		return nil, err
	}
	n := len(key) + 200
	for _, m := range h.Messages {
		n += len(m) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"sessionKey":`...)
	b = append(b, key...)
	b = append(b, `,"messages":`...)
	if h.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, m := range h.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, m...)
		}
		b = append(b, ']')
	}
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, h.Truncated)
	b = append(b, `,"droppedMessages":`...)
	b = strconv.AppendBool(b, h.DroppedMessages)
	b = append(b, `,"contentTruncated":`...)
	b = strconv.AppendBool(b, h.ContentTruncated)
	b = append(b, `,"contentRedacted":`...)
	b = strconv.AppendBool(b, h.ContentRedacted)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, int64(h.Bytes), 10)
	if h.Offset != nil {
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, int64(*h.Offset), 10)
	}
	if h.NextOffset != nil {
		b = append(b, `,"nextOffset":`...)
		b = strconv.AppendInt(b, int64(*h.NextOffset), 10)
	}
	if h.HasMore != nil {
		b = append(b, `,"hasMore":`...)
		b = strconv.AppendBool(b, *h.HasMore)
	}
	if h.TotalMessages != nil {
		b = append(b, `,"totalMessages":`...)
		b = strconv.AppendInt(b, int64(*h.TotalMessages), 10)
	}
	return append(b, '}'), nil
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
