package rules

import (
	"regexp"
	"strings"
)

var sessionIDRe = regexp.MustCompile(`(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// LooksLikeSessionID reports a transcript UUID (a store entry's sessionId).
func LooksLikeSessionID(v string) bool { return sessionIDRe.MatchString(trim(v)) }

// LooksLikeSessionKey reports the canonical key shapes that must never be
// looked up as a sessionId. Apart from ACP keys the checks are
// case-sensitive, as upstream's are: an oddly cased key is routed through
// gateway resolution, which can canonicalize it.
func LooksLikeSessionKey(v string) bool {
	raw := trim(v)
	switch {
	case raw == "":
		return false
	case raw == "main", raw == "global", raw == "unknown", raw == "current":
		return true
	case IsAcpKey(raw):
		return true
	}
	for _, prefix := range []string{"agent:", "cron:", "hook:", "node-", "node:"} {
		if strings.HasPrefix(raw, prefix) {
			return true
		}
	}
	return strings.Contains(raw, ":group:") || strings.Contains(raw, ":channel:")
}

// ShouldResolveAsSessionID decides whether a sessionKey argument needs a
// gateway lookup (sessionId, or a custom key the store may still know)
// instead of the purely local display→internal mapping.
func ShouldResolveAsSessionID(v string) bool {
	return LooksLikeSessionID(v) || !LooksLikeSessionKey(v)
}
