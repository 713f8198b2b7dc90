package sanitize

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// MessageResult reports what HistoryMessage did to one message:
// Truncated when a text field was cut or a heavy field (details, usage, cost,
// thinkingSignature, openclawReasoningReplay, image data) was removed,
// Redacted when redaction changed any text.
type MessageResult struct {
	Truncated, Redacted bool
}

// HistoryValue applies HistoryMessage to v when it is a JSON object and
// leaves every other value untouched, as the reference does for non-object
// messages.
func (r *Redactor) HistoryValue(v any, applyVisible bool) MessageResult {
	if m, ok := v.(map[string]any); ok {
		return r.HistoryMessage(m, applyVisible)
	}
	return MessageResult{}
}

// HistoryMessage applies sessions_history's per-message sanitization
// to m in place. m is a message decoded from JSON (json.Number values, as
// from a Decoder with UseNumber, are understood).
//
// Every text field goes through the text rule: redact with ToolPayload, then
// TruncateUTF16 to HistoryTextMaxChars. With applyVisible, the text of an
// assistant message (string content, "text" blocks, top-level text) is first
// cleaned with VisibleText(History), the documented behaviour the newest seed
// asks for. Thinking blocks stay (the reference keeps them) and only get the
// text rule: their text is the reasoning itself, so the visible-text
// sanitizer would have nothing meaningful to strip from it.
func (r *Redactor) HistoryMessage(m map[string]any, applyVisible bool) MessageResult {
	var res MessageResult
	visible := applyVisible && m["role"] == "assistant"
	for _, k := range [...]string{"details", "usage", "cost"} {
		if _, ok := m[k]; ok {
			delete(m, k)
			res.Truncated = true
		}
	}
	switch c := m["content"].(type) {
	case string:
		m["content"] = r.historyText(c, visible, &res)
	case []any:
		for _, blk := range c {
			if b, ok := blk.(map[string]any); ok {
				r.historyBlock(b, visible, &res)
			}
		}
	}
	if t, ok := m["text"].(string); ok {
		m["text"] = r.historyText(t, visible, &res)
	}
	return res
}

func (r *Redactor) historyBlock(b map[string]any, visible bool, res *MessageResult) {
	typ, _ := b["type"].(string)
	if t, ok := b["text"].(string); ok {
		b["text"] = r.historyText(t, visible && typ == "text", res)
	}
	if typ == "thinking" {
		if t, ok := b["thinking"].(string); ok {
			b["thinking"] = r.historyText(t, false, res)
		}
		for _, k := range [...]string{"thinkingSignature", "openclawReasoningReplay"} {
			if _, ok := b[k]; ok {
				delete(b, k)
				res.Truncated = true
			}
		}
	}
	if t, ok := b["partialJson"].(string); ok {
		b["partialJson"] = r.historyText(t, false, res)
	}
	if typ == "image" {
		var bytes any
		if data, ok := b["data"].(string); ok {
			bytes = estimateBase64DecodedBytes(data)
		} else if isJSONNumber(b["bytes"]) {
			bytes = b["bytes"]
		}
		if _, ok := b["data"]; ok {
			delete(b, "data")
			res.Truncated = true
		}
		b["omitted"] = true
		if bytes != nil {
			b["bytes"] = bytes
		}
	}
}

// historyText is the reference's truncateHistoryText, optionally preceded by
// the visible-text sanitizer.
func (r *Redactor) historyText(s string, visible bool, res *MessageResult) string {
	if visible {
		s = VisibleText(s, History)
	}
	out, redacted := r.ToolPayload(s)
	out, truncated := TruncateUTF16(out, HistoryTextMaxChars)
	res.Redacted = res.Redacted || redacted
	res.Truncated = res.Truncated || truncated
	return out
}

func isJSONNumber(v any) bool {
	switch n := v.(type) {
	case json.Number:
		_, err := strconv.ParseFloat(string(n), 64)
		return err == nil
	case float64:
		return !math.IsNaN(n)
	case float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}

// estimateBase64DecodedBytes mirrors the reference: characters at or below
// U+0020 are ignored, trailing '=' (one or two, whitespace allowed between)
// is padding, and the estimate is floor(len*3/4) - padding, at least 0. The
// length is counted in UTF-16 units, as JavaScript does.
func estimateBase64DecodedBytes(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			if c > 0x20 {
				n++
			}
			i++
			continue
		}
		u, w := charUnits(s, i)
		n += u
		i += w
	}
	if n == 0 {
		return 0
	}
	end := len(s) - 1
	skip := func() {
		for end >= 0 && s[end] <= 0x20 {
			end--
		}
	}
	padding := 0
	skip()
	if end >= 0 && s[end] == '=' {
		padding = 1
		end--
		skip()
		if end >= 0 && s[end] == '=' {
			padding = 2
		}
	}
	return max(0, n*3/4-padding)
}

// ExtractAssistantText returns the visible reply of an assistant message, as
// sessions_send replies and announces use it (the reference's
// extractAssistantText): "" for any other role. When some text block carries
// a phased text signature, only final_answer text is taken; otherwise all
// text is. Each piece is cleaned with VisibleText(History), the pieces are
// joined with "" and the result trimmed. For stopReason "error" the text is
// rewritten as user-facing error copy.
func ExtractAssistantText(m map[string]any) string {
	if m["role"] != "assistant" {
		return ""
	}
	clean := func(s string) string { return VisibleText(s, History) }
	joined, ok := textForPhase(m, "final_answer", clean)
	if !ok {
		joined, ok = textForPhase(m, "", clean)
	}
	if !ok {
		return ""
	}
	if m["stopReason"] == "error" {
		return userFacingError(joined)
	}
	return joined
}

func normalizePhase(v any) string {
	if s, ok := v.(string); ok && (s == "commentary" || s == "final_answer") {
		return s
	}
	return ""
}

// signaturePhase parses a textSignature: a plain string is a bare id; a JSON
// object must have v == 1 and may carry a phase.
func signaturePhase(v any) string {
	s, ok := v.(string)
	if !ok || trimJS(s) == "" || !strings.HasPrefix(s, "{") {
		return ""
	}
	var sig struct {
		V     any `json:"v"`
		Phase any `json:"phase"`
	}
	if json.Unmarshal([]byte(s), &sig) != nil {
		return ""
	}
	if f, ok := sig.V.(float64); !ok || f != 1 {
		return ""
	}
	return normalizePhase(sig.Phase)
}

// textForPhase is extractAssistantTextForPhase with joinWith "".
func textForPhase(m map[string]any, phase string, clean func(string) string) (string, bool) {
	include := func(resolved string) bool { return resolved == phase }
	messagePhase := normalizePhase(m["phase"])
	finish := func(s string) (string, bool) {
		s = trimJS(s)
		return s, s != ""
	}
	if t, ok := m["text"].(string); ok {
		if !include(messagePhase) {
			return "", false
		}
		return finish(clean(t))
	}
	if t, ok := m["content"].(string); ok {
		if !include(messagePhase) {
			return "", false
		}
		return finish(clean(t))
	}
	blocks, ok := m["content"].([]any)
	if !ok {
		return "", false
	}
	explicit := false
	for _, blk := range blocks {
		if b, ok := blk.(map[string]any); ok && b["type"] == "text" && signaturePhase(b["textSignature"]) != "" {
			explicit = true
			break
		}
	}
	if phase == "" && explicit {
		return "", false
	}
	var parts []string
	for _, blk := range blocks {
		b, ok := blk.(map[string]any)
		if !ok || b["type"] != "text" {
			continue
		}
		t, ok := b["text"].(string)
		if !ok {
			continue
		}
		resolved := signaturePhase(b["textSignature"])
		if resolved == "" && !explicit {
			resolved = messagePhase
		}
		if !include(resolved) {
			continue
		}
		if c := clean(t); trimJS(c) != "" {
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return "", false
	}
	return finish(strings.Join(parts, ""))
}
