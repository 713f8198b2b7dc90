package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Sizes of the mailbox-style previews on sessions_list rows. OpenClaw
// names the fields but not their lengths; these are ours (docs/tools.md).
const (
	derivedTitleMaxChars = 60
	previewMaxChars      = 120
)

// decodeMessage reads one transcript entry as a generic JSON object, keeping
// numbers exact so re-encoding does not change them.
func decodeMessage(data []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

func role(m map[string]any) string {
	s, _ := m["role"].(string)
	return s
}

// isToolMessage is OpenClaw's filter for "tool messages".
func isToolMessage(m map[string]any) bool {
	r := role(m)
	return r == "toolResult" || r == "tool"
}

// runMarker is the field the gateway puts on the transcript entries a run
// appends, so a redelivered run can see what it already wrote; it is
// bookkeeping, never shown to agents.
const runMarker = "__sessionbus"

// viewMessage is one entry after the history sanitizer: the JSON the agent
// sees and the flags it raised.
type viewMessage struct {
	raw       json.RawMessage
	seq       uint64 // 1-based transcript position
	truncated bool
	redacted  bool
}

// sanitizeEntries decodes, filters and sanitizes transcript entries the way
// sessions_history and sessions_list messages both need them. withSeq tags
// each message with its 1-based transcript position (`__openclaw.seq`), as
// the gateway does for paginated reads.
func (d *Deps) sanitizeEntries(entries []transcripts.Entry, includeTools, withSeq bool) []viewMessage {
	out := make([]viewMessage, 0, len(entries))
	for _, e := range entries {
		if v := d.viewEntry(e, withSeq, !includeTools); v.shows(includeTools) {
			out = append(out, v.msg)
		}
	}
	return out
}

// entryView is what the history projection makes of one transcript entry.
// It depends only on the entry's bytes and number, withSeq and the
// redactor, so it can be kept for as long as those stay the same.
type entryView struct {
	msg   viewMessage
	tool  bool // a tool message: shown only with includeTools
	shown bool // false: never shown (undecodable, or dropped by keepInHistory)
}

func (v entryView) shows(includeTools bool) bool { return v.shown && (includeTools || !v.tool) }

// viewEntry projects one entry. skipTools leaves a tool message unsanitized
// (shown false), for callers that will not show it anyway.
func (d *Deps) viewEntry(e transcripts.Entry, withSeq, skipTools bool) entryView {
	m, ok := decodeMessage(e.Data)
	if !ok {
		return entryView{}
	}
	compaction := m["type"] == "compaction"
	if compaction {
		m = compactionMarker(m)
	}
	v := entryView{tool: isToolMessage(m)}
	if (skipTools && v.tool) || !keepInHistory(m) {
		return v
	}
	delete(m, runMarker)
	res := d.Redactor.HistoryMessage(m, true)
	if withSeq || compaction {
		meta := map[string]any{}
		if withSeq {
			meta["seq"] = e.N + 1
		}
		if compaction {
			meta["kind"], meta["id"] = "compaction", m["__compactionId"]
			delete(m, "__compactionId")
		}
		m["__openclaw"] = meta
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v
	}
	v.msg = viewMessage{raw: raw, seq: e.N + 1, truncated: res.Truncated, redacted: res.Redacted}
	v.shown = true
	return v
}

// compactionMarker is how OpenClaw's history shows a compaction entry: a
// system message saying "Compaction", not its summary (the model's
// context carries that; the history keeps every older entry instead).
func compactionMarker(m map[string]any) map[string]any {
	out := map[string]any{
		"role":           "system",
		"content":        []any{map[string]any{"type": "text", "text": "Compaction"}},
		"__compactionId": m["id"],
	}
	if ts, ok := m["timestamp"]; ok {
		out["timestamp"] = ts
	}
	return out
}

// keepInHistory is the gateway projection's drop rule:
// assistant commentary-phase messages and assistant messages that are only
// a suppressed control reply never reach the agent.
func keepInHistory(m map[string]any) bool {
	if role(m) != "assistant" {
		return true
	}
	if phase, _ := m["phase"].(string); phase == "commentary" {
		return false
	}
	if sanitize.IsSilentReply(plainText(m)) {
		return !onlyText(m)
	}
	return true
}

// onlyText reports whether a message carries nothing but text.
func onlyText(m map[string]any) bool {
	blocks, ok := m["content"].([]any)
	if !ok {
		return true
	}
	for _, b := range blocks {
		if bm, ok := b.(map[string]any); ok && bm["type"] != nil && bm["type"] != "text" {
			return false
		}
	}
	return true
}

// plainText is the visible text of a message for one-line previews.
func plainText(m map[string]any) string {
	if role(m) == "assistant" {
		return sanitize.ExtractAssistantText(m)
	}
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, blk := range c {
			if bm, ok := blk.(map[string]any); ok {
				if t, ok := bm["text"].(string); ok && (bm["type"] == nil || bm["type"] == "text") {
					if b.Len() > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(t)
				}
			}
		}
		return b.String()
	}
	if t, ok := m["text"].(string); ok {
		return t
	}
	return ""
}

// oneLine redacts, collapses whitespace and shortens text for a preview.
func (d *Deps) oneLine(s string, max int) string {
	s, _ = d.Redactor.ToolPayload(s)
	s = strings.Join(strings.Fields(s), " ")
	if cut, ok := sanitize.TruncateUTF16(s, max); ok {
		return strings.TrimSuffix(cut, sanitize.TruncatedMarker) + "…"
	}
	return s
}

// derivedTitle is the first user message of the transcript, as one line.
func (d *Deps) derivedTitle(ctx context.Context, e *sessions.Entry) string {
	if e.DerivedTitle() != "" {
		return d.oneLine(e.DerivedTitle(), derivedTitleMaxChars)
	}
	entries, err := d.Transcripts.Read(ctx, bus.EncodeKey(e.Key), 0, 8)
	if err != nil {
		return ""
	}
	for _, en := range entries {
		if m, ok := decodeMessage(en.Data); ok && role(m) == "user" {
			if t := plainText(m); strings.TrimSpace(t) != "" {
				return d.oneLine(t, derivedTitleMaxChars)
			}
		}
	}
	return ""
}

// lastMessagePreview is the newest non-tool message, as one line.
func (d *Deps) lastMessagePreview(ctx context.Context, e *sessions.Entry) string {
	entries, _, err := d.Transcripts.Tail(ctx, bus.EncodeKey(e.Key), 4, 0)
	if err != nil {
		return ""
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if m, ok := decodeMessage(entries[i].Data); ok && !isToolMessage(m) {
			if t := plainText(m); strings.TrimSpace(t) != "" {
				return d.oneLine(t, previewMaxChars)
			}
		}
	}
	return ""
}
