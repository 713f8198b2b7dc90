package rules

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sessionbus/sessionbus/config"
)

// Sub-agent roles (reference §5.3) and control scopes.
const (
	RoleMain         = "main"
	RoleOrchestrator = "orchestrator"
	RoleLeaf         = "leaf"

	ControlChildren = "children"
	ControlNone     = "none"
)

// SubagentAlwaysDenied are the tools no sub-agent session gets (§5.3).
var SubagentAlwaysDenied = []string{"gateway", "agents_list", "whatsapp_login", "session_status", "cron", "sessions_send"}

// SubagentLeafDenied are the tools a leaf sub-agent (one at the deepest
// allowed depth) additionally loses: it may not orchestrate children.
var SubagentLeafDenied = []string{"subagents", "sessions_list", "sessions_history", "sessions_spawn"}

// RoleForDepth is the role of a session at depth d under maxSpawnDepth:
// 0 ⇒ main, below the maximum ⇒ orchestrator, else leaf.
func RoleForDepth(d, maxSpawnDepth int) string {
	switch {
	case d <= 0:
		return RoleMain
	case d < maxSpawnDepth:
		return RoleOrchestrator
	}
	return RoleLeaf
}

// ControlScopeFor is the control scope of a role: a leaf controls nothing.
func ControlScopeFor(role string) string {
	if role == RoleLeaf {
		return ControlNone
	}
	return ControlChildren
}

// SessionRole is what the tool policy needs to know about a caller's
// session, read from its store entry (or, without one, from its key).
type SessionRole struct {
	Subagent bool
	Depth    int
	Role     string // main | orchestrator | leaf
}

// ResolveSessionRole classifies a session. A session is a sub-agent when
// its entry says so (spawnDepth > 0 or a stored sub-agent role) or its key
// has a `:subagent:` segment. The stored role wins over the role its depth
// gives, as in the reference. spawnDepth is nil when the entry has none
// (or there is no entry).
func ResolveSessionRole(key string, spawnDepth *int, storedRole string, maxSpawnDepth int) SessionRole {
	depth := 0
	switch {
	case spawnDepth != nil && *spawnDepth >= 0:
		depth = *spawnDepth
	default:
		depth = SubagentDepthFromKey(key)
	}
	sub := depth > 0 || storedRole == RoleOrchestrator || storedRole == RoleLeaf || IsSubagentKey(key)
	if !sub {
		return SessionRole{Role: RoleMain}
	}
	depth = max(depth, 1)
	role := storedRole
	if role != RoleOrchestrator && role != RoleLeaf {
		role = RoleForDepth(depth, maxSpawnDepth)
		if role == RoleMain {
			role = RoleLeaf
		}
	}
	return SessionRole{Subagent: true, Depth: depth, Role: role}
}

// ToolPolicy decides whether a session may call a tool. Today it holds one
// stage, the sub-agent policy (tools.subagents.tools over the base deny
// lists of §5.3); the general tool-policy layer (profiles, allow/deny,
// per-agent) adds its stages to Check and Allowed, which every caller
// already goes through.
type ToolPolicy struct {
	// tools.subagents.tools: Allow, when set, is an allow list (with
	// AlsoAllow merged in); Allow and AlsoAllow also remove names from the
	// base deny list; Deny adds names, and a deny always wins.
	SubagentAllow     []string
	SubagentAlsoAllow []string
	SubagentDeny      []string
	MaxSpawnDepth     int
}

// Denial says why a tool was refused: the rule, for the 403 message.
type Denial struct {
	Tool string
	Rule string
}

func (d *Denial) Error() string {
	return d.Tool + " is not available to " + d.Rule
}

// Check returns nil when s may call tool, else the rule that refuses it.
func (p ToolPolicy) Check(s SessionRole, tool string) *Denial {
	if !s.Subagent {
		return nil
	}
	name := normalizeToolName(tool)
	if matchAny(p.SubagentDeny, name) {
		return &Denial{Tool: tool, Rule: "sub-agent sessions (tools.subagents.tools.deny)"}
	}
	explicit := matchAny(p.SubagentAllow, name) || matchAny(p.SubagentAlsoAllow, name)
	if !explicit {
		if contains(SubagentAlwaysDenied, name) {
			return &Denial{Tool: tool, Rule: "sub-agent sessions (tools.subagents deny list)"}
		}
		if s.Role == RoleLeaf && contains(SubagentLeafDenied, name) {
			return &Denial{Tool: tool, Rule: fmt.Sprintf(
				"leaf sub-agent sessions (tools.subagents leaf deny list: depth %d of agents.defaults.subagents.maxSpawnDepth %d)", s.Depth, p.MaxSpawnDepth)}
		}
	}
	if len(p.SubagentAllow) > 0 && !explicit {
		return &Denial{Tool: tool, Rule: "sub-agent sessions (not in tools.subagents.tools.allow)"}
	}
	return nil
}

// Allowed filters tools (names) down to those s may call, keeping order.
func (p ToolPolicy) Allowed(s SessionRole, tools []string) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		if p.Check(s, t) == nil {
			out = append(out, t)
		}
	}
	return out
}

func normalizeToolName(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func contains(list []string, name string) bool {
	for _, x := range list {
		if x == name {
			return true
		}
	}
	return false
}

// matchAny reports whether name matches one of the patterns: a tool name,
// case-insensitive, where "*" matches any run of characters.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		p = normalizeToolName(p)
		if p == "" {
			continue
		}
		if !strings.Contains(p, "*") {
			if p == name {
				return true
			}
			continue
		}
		parts := strings.Split(p, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		if regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(name) {
			return true
		}
	}
	return false
}

// ConfigToolPolicy is the tool policy config gives sessions of agentID
// (tools.subagents.tools; maxSpawnDepth resolved for the agent).
func ConfigToolPolicy(cfg *config.Config, agentID string) ToolPolicy {
	t := cfg.Tools.Subagents.Tools
	return ToolPolicy{
		SubagentAllow: t.Allow, SubagentAlsoAllow: t.AlsoAllow, SubagentDeny: t.Deny,
		MaxSpawnDepth: cfg.SubagentsFor(agentID).MaxSpawnDepth,
	}
}

// SessionTools returns the names among tools that the session key may
// call, given its store entry's spawnDepth (nil: none) and stored
// subagentRole: what a model runtime should offer it. nil means no
// restriction (not a sub-agent); a sub-agent gets a non-nil list.
func SessionTools(cfg *config.Config, key string, spawnDepth *int, storedRole string, tools []string) []string {
	p := ConfigToolPolicy(cfg, AgentIDFromKey(key))
	role := ResolveSessionRole(key, spawnDepth, storedRole, p.MaxSpawnDepth)
	if !role.Subagent {
		return nil
	}
	return p.Allowed(role, tools)
}
