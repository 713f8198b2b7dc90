package rules

import "fmt"

// Visibility is tools.sessions.visibility: how far a session's tools can see.
type Visibility string

const (
	VisibilitySelf  Visibility = "self"  // only the requester's own session
	VisibilityTree  Visibility = "tree"  // the requester and the sessions it spawned (default)
	VisibilityAgent Visibility = "agent" // every session of the requester's agent
	VisibilityAll   Visibility = "all"   // everything, cross-agent subject to A2APolicy
)

// ParseVisibility reads the config value case-insensitively. Missing or
// invalid values mean tree; ok is false only for a non-empty invalid value,
// so the caller can warn about a typo instead of silently ignoring it.
func ParseVisibility(v string) (Visibility, bool) {
	switch Visibility(lowerTrim(v)) {
	case VisibilitySelf:
		return VisibilitySelf, true
	case VisibilityTree:
		return VisibilityTree, true
	case VisibilityAgent:
		return VisibilityAgent, true
	case VisibilityAll:
		return VisibilityAll, true
	case "":
		return VisibilityTree, true
	}
	return VisibilityTree, false
}

func (v Visibility) norm() Visibility {
	n, _ := ParseVisibility(string(v))
	return n
}

// Sandbox clamps (agents.defaults.sandbox.sessionToolsVisibility).
const (
	SandboxClampSpawned = "spawned"
	SandboxClampAll     = "all"
)

// sandboxClampIsAll treats anything but "all" as the default "spawned", so a
// typo in the clamp keeps the sandbox closed.
func sandboxClampIsAll(clamp string) bool { return lowerTrim(clamp) == SandboxClampAll }

// EffectiveVisibility applies the sandbox clamp. Under the default clamp a
// sandboxed caller gets exactly tree, which narrows agent/all but also widens
// self: that is upstream's behaviour, kept on purpose.
func EffectiveVisibility(configured Visibility, sandboxed bool, sandboxClamp string) Visibility {
	configured = configured.norm()
	if sandboxed && !sandboxClampIsAll(sandboxClamp) {
		return VisibilityTree
	}
	return configured
}

// RestrictToSpawned reports the stricter sandbox mode in which a caller only
// sees its own spawned children: listings ask the store for spawnedBy only,
// and key-addressed targets must be confirmed as children. Sub-agent
// requesters are exempt, as upstream's are; a requester without a key has no
// children to anchor the restriction on.
func RestrictToSpawned(sandboxed bool, clamp, requesterKey string) bool {
	return sandboxed && !sandboxClampIsAll(clamp) && trim(requesterKey) != "" && !IsSubagentKey(requesterKey)
}

// SandboxNotVisibleError is the forbidden message for a target a
// spawned-restricted sandbox may not see; ref is the caller's input.
func SandboxNotVisibleError(ref string) string {
	return "Session not visible from this sandboxed agent session: " + ref
}

// visibilityScopeText describes each level for the sessions_list warning.
// OpenClaw's docs quote the warning but not these texts; they are taken from
// the scope column of OpenClaw's visibility table.
var visibilityScopeText = map[Visibility]string{
	VisibilitySelf:  "only the current session",
	VisibilityTree:  "current session + spawned sub-agents",
	VisibilityAgent: "all sessions for this agent",
}

// VisibilityWarning is the `visibility.warning` sessions_list attaches when
// the effective visibility hides sessions; it is "" for all, which hides
// nothing.
func VisibilityWarning(v Visibility) string {
	v = v.norm()
	if v == VisibilityAll {
		return ""
	}
	return fmt.Sprintf("Session visibility is restricted (effective tools.sessions.visibility=%s: %s). "+
		"Sessions outside that scope are omitted from results and count.", v, visibilityScopeText[v])
}
