package sanitize

import (
	"encoding/json"
	"regexp"
	"strings"
)

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
