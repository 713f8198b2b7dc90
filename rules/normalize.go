package rules

import "strings"

// trim follows JavaScript's String.prototype.trim rather than
// strings.TrimSpace: the two disagree on U+FEFF and U+0085, and values that
// OpenClaw would treat as blank must be blank here too.
func trim(s string) string { return strings.TrimFunc(s, isJSSpace) }

func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// lowerTrim is the canonical form OpenClaw compares keys and config values in.
func lowerTrim(s string) string {
	if lowerTrimmed(s) {
		return s
	}
	return strings.ToLower(trim(s))
}

// lowerTrimmed reports an ASCII s without upper case or space at either
// end: its own lowerTrim (most keys and values, checked without decoding
// runes).
func lowerTrimmed(s string) bool {
	if s == "" || s[0] <= ' ' || s[len(s)-1] <= ' ' {
		return s == ""
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x7f || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// FirstNonEmpty implements OpenClaw's `a ?? b ?? c` chains, where an
// absent value is the empty string in Go. Blank counts as absent and the
// value comes back trimmed, so stray whitespace in a stored field never wins
// over a real value behind it. Handlers and the gateway both use it.
func FirstNonEmpty(values ...string) string {
	for _, v := range values {
		if v = trim(v); v != "" {
			return v
		}
	}
	return ""
}
