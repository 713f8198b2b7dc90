package rules

import (
	"regexp"
	"strings"
)

// DefaultAgentID is the agent a key belongs to when it names none (legacy
// bare keys such as "main" or "cron:nightly").
const DefaultAgentID = "main"

// DefaultMainKey is the last segment of an agent's main session key when
// session.mainKey is not configured.
const DefaultMainKey = "main"

// Key shapes returned by ClassifyKeyShape.
const (
	ShapeMissing        = "missing"
	ShapeAgent          = "agent"
	ShapeMalformedAgent = "malformed_agent"
	ShapeLegacyOrAlias  = "legacy_or_alias"
)

// ParseAgentSessionKey splits an agent-scoped key "agent:<agentId>:<rest>".
// Both parts come back lower-cased because keys compare case-insensitively.
// Empty segments are dropped before counting, so "agent::broken" has only two
// segments and is not an agent key (it is "malformed_agent").
func ParseAgentSessionKey(k string) (agentID, rest string, ok bool) {
	if canonicalKey(k) {
		// the form nearly every stored key has, split without copying: a
		// worker parses each of a million keys several times at its start
		r, found := strings.CutPrefix(k, "agent:")
		if !found {
			return "", "", false
		}
		if agentID, rest, ok = strings.Cut(r, ":"); !ok {
			return "", "", false
		}
		return agentID, rest, true
	}
	raw := lowerTrim(k)
	if raw == "" {
		return "", "", false
	}
	parts := nonEmptySegments(raw)
	if len(parts) < 3 || parts[0] != "agent" {
		return "", "", false
	}
	return parts[1], strings.Join(parts[2:], ":"), true
}

// canonicalKey reports a key that is its own lowerTrim and has no empty
// segment: printable ASCII without upper case, not starting or ending with
// a colon, no two colons together.
func canonicalKey(k string) bool {
	if k == "" || k[0] == ':' || k[len(k)-1] == ':' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || ('A' <= c && c <= 'Z') || (c == ':' && k[i-1] == ':') {
			return false
		}
	}
	return true
}

func nonEmptySegments(s string) []string {
	parts := strings.Split(s, ":")
	out := parts[:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ClassifyKeyShape tells apart keys that carry an agent id, keys that try to
// and fail (which OpenClaw drops from listings), and legacy or alias keys.
func ClassifyKeyShape(k string) string {
	raw := trim(k)
	switch {
	case raw == "":
		return ShapeMissing
	case isAgentKey(raw):
		return ShapeAgent
	case strings.HasPrefix(strings.ToLower(raw), "agent:"):
		return ShapeMalformedAgent
	default:
		return ShapeLegacyOrAlias
	}
}

// IsMalformedAgentKey reports a key that starts "agent:" but names no agent
// or nothing after it: upstream's parser (newer than ParseAgentSessionKey's
// rule, which skips empty segments) refuses an empty agent id, so
// agent::main:main is malformed too, and sessions_list leaves every such row
// out.
func IsMalformedAgentKey(k string) bool {
	raw := lowerTrim(k)
	if !strings.HasPrefix(raw, "agent:") {
		return false
	}
	if ClassifyKeyShape(k) == ShapeMalformedAgent {
		return true
	}
	agentEnd := strings.IndexByte(raw[len("agent:"):], ':')
	if agentEnd < 0 {
		return true
	}
	agentID := trim(raw[len("agent:") : len("agent:")+agentEnd])
	rest := raw[len("agent:")+agentEnd+1:]
	return agentID == "" || rest == "" || strings.HasPrefix(rest, ":")
}

func isAgentKey(k string) bool {
	_, _, ok := ParseAgentSessionKey(k)
	return ok
}

// AgentIDFromKey is the agent that owns a key; keys without an agent prefix
// (the alias "main", "global", legacy bare keys) belong to the default
// agent, DefaultAgentID. The id is normalized (as upstream's
// resolveAgentIdFromSessionKey does) so two spellings of one agent compare
// equal. It is the one rule for a key's agent: the visibility guard, the
// run requests the handlers queue and the gateway's agent-to-agent steps all
// use it, so a key never belongs to one agent in a tool and another in a run.
func AgentIDFromKey(k string) string { return ParseKey(k).AgentID }

// restOrRaw is the part of a key after "agent:<id>:", or the whole lower-cased
// key when it has no agent prefix, so legacy bare keys classify like scoped
// ones.
func restOrRaw(k string) string { return ParseKey(k).RestOrLower() }

var cronRunRestRe = regexp.MustCompile(`^cron:[^:]+:run:[^:]+$`)

// IsCronRunKey reports a per-run cron key (agent:<id>:cron:<job>:run:<run>);
// sessions.list never returns these.
func IsCronRunKey(k string) bool { return ParseKey(k).IsCronRun() }

// IsCronKey reports an agent-scoped cron key. A bare "cron:job" is not one:
// OpenClaw only recognises cron keys after parsing.
func IsCronKey(k string) bool { return ParseKey(k).IsCron() }

// IsSubagentKey accepts both the bare and the agent-scoped form.
func IsSubagentKey(k string) bool { return ParseKey(k).IsSubagent() }

// IsAcpKey accepts both the bare and the agent-scoped form.
func IsAcpKey(k string) bool { return ParseKey(k).IsAcp() }

// SubagentDepthFromKey is only a fallback: sub-agent keys are flat, so the
// real depth lives in the store (spawnDepth). It counts ":subagent:" markers.
func SubagentDepthFromKey(k string) int { return ParseKey(k).SubagentDepth() }

const threadMarker = ":thread:"

// ParseThreadSuffix splits "<base>:thread:<id>" at the last marker, matched
// case-insensitively. base keeps the caller's casing because it may be used
// as a store key. ok is false when there is no marker or the thread id is
// blank; base is then k unchanged, so callers can use base unconditionally.
// Telegram ":topic:" suffixes are deliberately not threads.
func ParseThreadSuffix(k string) (base, threadID string, ok bool) {
	i := lastIndexASCIIFold(k, threadMarker)
	if i < 0 {
		return k, "", false
	}
	threadID = trim(k[i+len(threadMarker):])
	if threadID == "" {
		return k, "", false
	}
	return k[:i], threadID, true
}

// lastIndexASCIIFold avoids strings.ToLower, which can change byte lengths
// for some non-ASCII runes and would shift the index; the marker is ASCII, so
// folding ASCII letters is exact.
func lastIndexASCIIFold(s, marker string) int {
	for i := len(s) - len(marker); i >= 0; i-- {
		if asciiEqualFold(s[i:i+len(marker)], marker) {
			return i
		}
	}
	return -1
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}
