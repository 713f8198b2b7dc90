package sanitize

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

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

// User-facing error copy for stopReason "error". The reference runs a large
// catalogue of provider-specific rewrites; this keeps the HTTP-status family
// the spec names ("500 Internal Server Error" ⇒ "HTTP 500: Internal Server
// Error") and the JSON API error payload form, and otherwise returns the
// text unchanged.

var (
	leadingHTTPStatus = regexp.MustCompile(`(?is)^(?:http\s*)?(\d{3})(?:\s+(.+))?$`)
	httpStatusPrefix  = regexp.MustCompile(`(?i)^(?:http\s*)?(\d{3})\s+([^\n\r\x{2028}\x{2029}]+)$`)
	finalTagPlain     = regexp.MustCompile(`(?i)<\s*/?\s*final\s*>`)
)

var httpErrorHints = []string{
	"error", "bad request", "not found", "unauthorized", "forbidden",
	"internal server", "service unavailable", "gateway", "rate limit",
	"overloaded", "timeout", "timed out", "invalid", "too many requests",
	"permission",
}

func userFacingError(text string) string {
	trimmed := trimJS(finalTagPlain.ReplaceAllString(text, ""))
	if trimmed == "" {
		return ""
	}
	if isRawAPIErrorPayload(trimmed) || isLikelyHTTPErrorText(trimmed) {
		return formatRawAssistantError(trimmed)
	}
	return text
}

func isLikelyHTTPErrorText(s string) bool {
	m := leadingHTTPStatus.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	if m[1] < "400" {
		return false
	}
	rest := strings.ToLower(trimJS(m[2]))
	for _, h := range httpErrorHints {
		if strings.Contains(rest, h) {
			return true
		}
	}
	return false
}

func isRawAPIErrorPayload(s string) bool {
	if !strings.HasPrefix(s, "{") {
		return false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &obj) != nil {
		return false
	}
	_, hasErr := obj["error"]
	_, hasCode := obj["code"]
	return hasErr || hasCode
}

type apiErrorInfo struct {
	httpCode, typ, message, requestID string
}

// parseAPIErrorInfo reads a provider error payload, optionally after a
// leading HTTP status: {"type":..,"message":..,"request_id":..,
// "error":{"type"|"code":..,"message":..}}.
func parseAPIErrorInfo(s string) (apiErrorInfo, bool) {
	var info apiErrorInfo
	payload := s
	if m := httpStatusPrefix.FindStringSubmatch(s); m != nil {
		info.httpCode = m[1]
		payload = trimJS(m[2])
	}
	if !strings.HasPrefix(payload, "{") {
		return info, false
	}
	var obj map[string]any
	if json.Unmarshal([]byte(payload), &obj) != nil {
		return info, false
	}
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	if id := str(obj, "request_id"); id != "" {
		info.requestID = id
	} else {
		info.requestID = str(obj, "requestId")
	}
	info.typ, info.message = str(obj, "type"), str(obj, "message")
	if e, ok := obj["error"].(map[string]any); ok {
		if t := str(e, "type"); t != "" {
			info.typ = t
		} else if c := str(e, "code"); c != "" {
			info.typ = c
		}
		if msg := str(e, "message"); msg != "" {
			info.message = msg
		}
	}
	return info, info.message != ""
}

func formatRawAssistantError(s string) string {
	if m := httpStatusPrefix.FindStringSubmatch(s); m != nil {
		if rest := trimJS(m[2]); !strings.HasPrefix(rest, "{") {
			return "HTTP " + m[1] + ": " + rest
		}
	}
	if info, ok := parseAPIErrorInfo(s); ok {
		out := "LLM error"
		if info.httpCode != "" {
			out = "HTTP " + info.httpCode
		}
		if info.typ != "" {
			out += " " + info.typ
		}
		out += ": " + info.message
		if info.requestID != "" {
			out += " (request_id: " + info.requestID + ")"
		}
		return out
	}
	if utf16Len(s) > 600 {
		return s[:utf16PrefixEnd(s, 600)] + "…"
	}
	return s
}

func decodeRune(s string, i int) (rune, int) {
	return utf8.DecodeRuneInString(s[i:])
}
