package rules

import (
	"regexp"
	"strings"
)

var invalidAgentRunRe = regexp.MustCompile(`[^a-z0-9_-]+`)

const maxAgentIDLen = 64

// ValidAgentID is the strict check sessions_spawn applies to explicit ids: it
// rejects rather than repairs. It tests ^[a-z0-9][a-z0-9_-]{0,63}$
// case-insensitively on the trimmed value, folding ASCII only: Go's (?i)
// would also fold the Kelvin sign to "k", JavaScript's /i does not.
func ValidAgentID(id string) bool {
	t := trim(id)
	if len(t) == 0 || len(t) > maxAgentIDLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		alnum := ('a' <= c|0x20 && c|0x20 <= 'z') || ('0' <= c && c <= '9') // c|0x20 lands in a–z only for ASCII letters
		if !alnum && (i == 0 || (c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

// NormalizeAgentID repairs an id the way OpenClaw does everywhere except
// sessions_spawn, so ids typed loosely in config or parameters still name the
// same agent. It is faithful to upstream, including its quirk that a leading
// "_" survives (only dashes are stripped), so the result is not always
// ValidAgentID.
func NormalizeAgentID(id string) string {
	t := trim(id)
	if t == "" {
		return DefaultAgentID
	}
	if ValidAgentID(t) {
		return strings.ToLower(t)
	}
	n := invalidAgentRunRe.ReplaceAllString(strings.ToLower(t), "-")
	n = strings.Trim(n, "-")
	if len(n) > maxAgentIDLen {
		n = n[:maxAgentIDLen] // ASCII only after the replacement, so a byte cut is a char cut.
	}
	if n == "" {
		return DefaultAgentID
	}
	return n
}
