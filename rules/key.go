package rules

import "strings"

// Key is a session key parsed once. A decision reads its fields instead of
// parsing the string again: a send's trip used to parse its keys five
// times, in as many rules. The string functions below (AgentIDFromKey,
// IsSubagentKey, ...) are this type's methods for callers holding a bare
// string, so there is one rule for each fact.
type Key struct {
	// Raw is the key as given (it may be a store key: its case is kept).
	Raw string
	// AgentID is the agent that owns the key, normalized; DefaultAgentID
	// for a key that names none (the alias "main", legacy bare keys).
	AgentID string
	// Scoped is set for "agent:<id>:<rest>" keys.
	Scoped bool
	// rest is the part after "agent:<id>:", lower-cased, for a scoped key;
	// lower is the whole key lower-cased and trimmed (the same string as
	// Raw for the canonical form nearly every stored key has)
	rest, lower string
}

// ParseKey parses k once. The canonical form (lower case, no spaces, no
// empty segment) is split without copying.
func ParseKey(k string) Key {
	key := Key{Raw: k, AgentID: DefaultAgentID}
	if canonicalKey(k) {
		key.lower = k
	} else {
		key.lower = lowerTrim(k)
	}
	if agentID, rest, ok := ParseAgentSessionKey(k); ok {
		key.Scoped, key.rest, key.AgentID = true, rest, NormalizeAgentID(agentID)
	}
	return key
}

// String is the key as given.
func (k Key) String() string { return k.Raw }

// Rest is the part after "agent:<id>:", lower-cased; "" for a key that is
// not agent-scoped.
func (k Key) Rest() string { return k.rest }

// RestOrLower is Rest for a scoped key, else the whole key lower-cased, so
// legacy bare keys classify like scoped ones.
func (k Key) RestOrLower() string {
	if k.Scoped {
		return k.rest
	}
	return k.lower
}

// IsSubagent accepts both the bare and the agent-scoped form.
func (k Key) IsSubagent() bool {
	return strings.HasPrefix(k.lower, "subagent:") || strings.HasPrefix(k.rest, "subagent:")
}

// IsAcp accepts both the bare and the agent-scoped form.
func (k Key) IsAcp() bool {
	return strings.HasPrefix(k.lower, "acp:") || strings.HasPrefix(k.rest, "acp:")
}

// IsCron reports an agent-scoped cron key. A bare "cron:job" is not one:
// OpenClaw only recognises cron keys after parsing.
func (k Key) IsCron() bool { return strings.HasPrefix(k.rest, "cron:") }

// IsCronRun reports a per-run cron key (agent:<id>:cron:<job>:run:<run>);
// sessions.list never returns these.
func (k Key) IsCronRun() bool { return k.IsCron() && cronRunRestRe.MatchString(k.rest) }

// SubagentDepth is only a fallback: sub-agent keys are flat, so the real
// depth lives in the store (spawnDepth). It counts ":subagent:" markers.
func (k Key) SubagentDepth() int { return strings.Count(k.lower, ":subagent:") }

// Malformed reports a key that starts "agent:" but names no agent or
// nothing after it (IsMalformedAgentKey).
func (k Key) Malformed() bool { return IsMalformedAgentKey(k.Raw) }
