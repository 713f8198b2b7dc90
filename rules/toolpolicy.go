package rules

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sessionbus/sessionbus/config"
)

// Sub-agent roles and control scopes, OpenClaw's names (docs/subagents.md,
// "Depth and roles").
const (
	RoleMain         = "main"
	RoleOrchestrator = "orchestrator"
	RoleLeaf         = "leaf"

	ControlChildren = "children"
	ControlNone     = "none"
)

// SubagentAlwaysDenied are the tools no sub-agent session gets, as in
// OpenClaw (docs/subagents.md, "Child tool sets").
var SubagentAlwaysDenied = []string{"gateway", "agents_list", "whatsapp_login", "session_status", "cron", "sessions_send"}

// SubagentLeafDenied are the tools a leaf sub-agent (one at the deepest
// allowed depth) additionally loses: it may not orchestrate children.
// sessions_search is among them, as in OpenClaw's later catalog: it reads
// what sessions_history reads.
var SubagentLeafDenied = []string{"subagents", "sessions_list", "sessions_history", "sessions_spawn", "sessions_search"}

// OptInTools are served but refused to every session until config names
// them exactly (no wildcard, no group) in tools.allow, tools.alsoAllow or
// an agent's agents.list[].tools.allow/alsoAllow. sessions_search reads
// the text of every transcript its caller may see through the transcript
// index, which a deployment runs on purpose; a config written before it
// existed (tools.allow ["*"], group:sessions) must not start offering it.
var OptInTools = []string{"sessions_search"}

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
// gives, as in OpenClaw. spawnDepth is nil when the entry has none
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

// Tool profiles (tools.profile, OpenClaw's profiles; docs/config.md): the
// session tools each built-in profile grants. "full" (and no profile) grants every
// tool; agents_list is in no profile.
var toolProfiles = map[string][]string{
	"minimal":   {"session_status"},
	"coding":    {"session_status", "sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "sessions_yield", "subagents"},
	"messaging": {"session_status", "sessions_list", "sessions_history", "sessions_send"},
}

// toolGroups are the group aliases allow/alsoAllow/deny lists may name:
// group:sessions is every session tool, group:openclaw every core
// tool, which here is every tool this build serves. A group denies an
// opt-in tool (OptInTools) but never opts in to one.
var toolGroups = map[string][]string{
	"group:sessions": {"sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "sessions_yield", "subagents", "session_status", "sessions_search"},
	"group:openclaw": {"sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "sessions_yield", "subagents", "session_status", "agents_list", "sessions_search"},
}

// ProfileTools is the tool set of a built-in profile; nil for "full", ""
// or an unknown name (config.Validate refuses unknown names).
func ProfileTools(profile string) []string { return toolProfiles[normalizeToolName(profile)] }

// ToolPolicy decides whether a session may call a tool. Its stages run in
// OpenClaw's order and each can only narrow the set: the profile (with
// alsoAllow merged in), tools.allow/deny, the agent's
// agents.list[].tools.allow/deny, then the sub-agent policy. A deny
// always wins within its stage; an empty allow list restricts nothing.
// Workers check every call with it (403) and the gateway asks it what a
// model runtime offers, so both always agree.
type ToolPolicy struct {
	// AgentID is the caller's agent, named in per-agent denials.
	AgentID string
	// Profile is the effective profile (the agent's, else tools.profile)
	// and ProfileKey the key that set it; AlsoAllow (the agent's, else
	// tools.alsoAllow, named by AlsoAllowKey) adds tools to its set.
	Profile      string
	ProfileKey   string
	AlsoAllow    []string
	AlsoAllowKey string
	// Allow and Deny are tools.allow and tools.deny.
	Allow []string
	Deny  []string
	// AgentAllow and AgentDeny are agents.list[].tools.allow and deny.
	AgentAllow []string
	AgentDeny  []string

	// tools.subagents.tools: Allow, when set, is an allow list (with
	// AlsoAllow merged in); Allow and AlsoAllow also remove names from the
	// base deny list; Deny adds names, and a deny always wins.
	SubagentAllow     []string
	SubagentAlsoAllow []string
	SubagentDeny      []string
	MaxSpawnDepth     int

	// The stages a session's model, route and sandboxing select
	// (SessionToolPolicy); nil or empty: the stage restricts nothing.
	// ProviderProfile (tools.byProvider[...].profile, the agent's first)
	// narrows right after the profile, with ProviderAlsoAllow added to it.
	ProviderProfile      string
	ProviderProfileKey   string
	ProviderAlsoAllow    []string
	ProviderAlsoAllowKey string
	GlobalProvider       *ToolStage // after tools.allow/deny
	AgentProvider        *ToolStage // after the agent's allow/deny
	Group                *ToolStage
	Sandbox              *ToolStage
}

// Denial says why a tool was refused: the rule, for the 403 message, the
// stage that removed the tool and the config key that made it do so.
type Denial struct {
	Tool  string
	Rule  string
	Stage string
	Key   string
}

func (d *Denial) Error() string {
	return d.Tool + " is not available to " + d.Rule
}

// Check returns nil when s may call tool, else the rule that refuses it
// (the first stage, in pipeline order, that removes it). OpenClaw's
// order: profile, provider profile, tools.allow/deny, the provider's
// allow/deny, the agent's, the agent's provider's, group, sandbox,
// sub-agent.
func (p ToolPolicy) Check(s SessionRole, tool string) *Denial {
	name := normalizeToolName(tool)
	if set := ProfileTools(p.Profile); set != nil && !contains(set, name) && !matchAny(p.AlsoAllow, name) {
		return &Denial{Tool: tool, Stage: StageProfile, Key: p.ProfileKey, Rule: fmt.Sprintf("the %q tool profile (%s; list it in %s to add it)",
			normalizeToolName(p.Profile), p.ProfileKey, p.AlsoAllowKey)}
	}
	if set := ProfileTools(p.ProviderProfile); set != nil && !contains(set, name) && !matchAny(p.ProviderAlsoAllow, name) {
		return &Denial{Tool: tool, Stage: StageProvider, Key: p.ProviderProfileKey, Rule: fmt.Sprintf("the %q tool profile of this model (%s; list it in %s to add it)",
			normalizeToolName(p.ProviderProfile), p.ProviderProfileKey, p.ProviderAlsoAllowKey)}
	}
	if contains(OptInTools, name) && !p.optedIn(name) {
		return &Denial{Tool: tool, Stage: StageProfile, Key: p.AlsoAllowKey, Rule: fmt.Sprintf(
			"any session until config names it (an opt-in tool: list %q in %s or tools.allow)", name, p.AlsoAllowKey)}
	}
	if matchAny(p.Deny, name) {
		return &Denial{Tool: tool, Stage: StageGlobal, Key: "tools.deny", Rule: "any session (tools.deny)"}
	}
	if len(p.Allow) > 0 && !matchAny(p.Allow, name) {
		return &Denial{Tool: tool, Stage: StageGlobal, Key: "tools.allow", Rule: "any session (not in tools.allow)"}
	}
	if d := p.GlobalProvider.check(tool, name); d != nil {
		return d
	}
	if matchAny(p.AgentDeny, name) {
		key := fmt.Sprintf("agents.list[%s].tools.deny", p.AgentID)
		return &Denial{Tool: tool, Stage: StageAgent, Key: key, Rule: fmt.Sprintf("agent %q (agents.list[].tools.deny)", p.AgentID)}
	}
	if len(p.AgentAllow) > 0 && !matchAny(p.AgentAllow, name) {
		key := fmt.Sprintf("agents.list[%s].tools.allow", p.AgentID)
		return &Denial{Tool: tool, Stage: StageAgent, Key: key, Rule: fmt.Sprintf("agent %q (not in agents.list[].tools.allow)", p.AgentID)}
	}
	for _, st := range []*ToolStage{p.AgentProvider, p.Group, p.Sandbox} {
		if d := st.check(tool, name); d != nil {
			return d
		}
	}
	if !s.Subagent {
		return nil
	}
	return p.checkSubagent(s, tool, name)
}

// optedIn reports whether config names the opt-in tool name exactly in an
// allow list that applies to p's sessions.
func (p ToolPolicy) optedIn(name string) bool {
	for _, list := range [][]string{p.AlsoAllow, p.Allow, p.AgentAllow} {
		for _, x := range list {
			if normalizeToolName(x) == name {
				return true
			}
		}
	}
	return false
}

// checkSubagent is the last stage, the sub-agent policy (tools.subagents and
// the built-in deny lists above).
func (p ToolPolicy) checkSubagent(s SessionRole, tool, name string) *Denial {
	if matchAny(p.SubagentDeny, name) {
		return &Denial{Tool: tool, Stage: StageSubagent, Key: "tools.subagents.tools.deny", Rule: "sub-agent sessions (tools.subagents.tools.deny)"}
	}
	explicit := matchAny(p.SubagentAllow, name) || matchAny(p.SubagentAlsoAllow, name)
	if !explicit {
		if contains(SubagentAlwaysDenied, name) {
			return &Denial{Tool: tool, Stage: StageSubagent, Key: "tools.subagents (built-in deny list; tools.subagents.tools.alsoAllow re-allows)", Rule: "sub-agent sessions (tools.subagents deny list)"}
		}
		if s.Role == RoleLeaf && contains(SubagentLeafDenied, name) {
			return &Denial{Tool: tool, Stage: StageSubagent, Key: "agents.defaults.subagents.maxSpawnDepth (leaf deny list)", Rule: fmt.Sprintf(
				"leaf sub-agent sessions (tools.subagents leaf deny list: depth %d of agents.defaults.subagents.maxSpawnDepth %d)", s.Depth, p.MaxSpawnDepth)}
		}
	}
	if len(p.SubagentAllow) > 0 && !explicit {
		return &Denial{Tool: tool, Stage: StageSubagent, Key: "tools.subagents.tools.allow", Rule: "sub-agent sessions (not in tools.subagents.tools.allow)"}
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
// case-insensitive, where "*" matches any run of characters, or a group
// alias (group:sessions) naming a set of tools.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		p = normalizeToolName(p)
		if p == "" {
			continue
		}
		if g, ok := toolGroups[p]; ok {
			if contains(g, name) {
				return true
			}
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

// ConfigToolPolicy is the tool policy config gives sessions of agentID:
// tools.profile/alsoAllow (the agent's own when agents.list[].tools sets
// them), tools.allow/deny, agents.list[].tools.allow/deny, and
// tools.subagents.tools with maxSpawnDepth resolved for the agent.
func ConfigToolPolicy(cfg *config.Config, agentID string) ToolPolicy {
	t := cfg.Tools.Subagents.Tools
	p := ToolPolicy{
		AgentID: agentID,
		Profile: cfg.Tools.Profile, ProfileKey: "tools.profile",
		AlsoAllow: cfg.Tools.AlsoAllow, AlsoAllowKey: "tools.alsoAllow",
		Allow: cfg.Tools.Allow, Deny: cfg.Tools.Deny,
		SubagentAllow: t.Allow, SubagentAlsoAllow: t.AlsoAllow, SubagentDeny: t.Deny,
		MaxSpawnDepth: cfg.SubagentsFor(agentID).MaxSpawnDepth,
	}
	if a := cfg.Agent(agentID); a != nil && a.Tools != nil {
		at := a.Tools
		if at.Profile != "" {
			p.Profile, p.ProfileKey = at.Profile, fmt.Sprintf("agents.list[%s].tools.profile", agentID)
		}
		if at.AlsoAllow != nil {
			p.AlsoAllow, p.AlsoAllowKey = at.AlsoAllow, fmt.Sprintf("agents.list[%s].tools.alsoAllow", agentID)
		}
		p.AgentAllow, p.AgentDeny = at.Allow, at.Deny
	}
	return p
}

// SessionTools returns the names among tools that the session key may
// call, given its store entry's spawnDepth (nil: none) and stored
// subagentRole, by the stages config alone selects (no entry: the agent's
// model, no group route). ContextTools is the same for a full context.
func SessionTools(cfg *config.Config, key string, spawnDepth *int, storedRole string, tools []string) []string {
	c := SessionToolContext(cfg, key, SessionFacts{}, false, "")
	c.Role = ResolveSessionRole(key, spawnDepth, storedRole, cfg.SubagentsFor(AgentIDFromKey(key)).MaxSpawnDepth)
	return ContextTools(cfg, c, tools)
}

// ContextTools returns the names among tools that the session c
// describes may call: what a model runtime should offer it. nil means no
// restriction (every tool); a sub-agent, or a session whose policy
// removes any tool, gets a non-nil list.
func ContextTools(cfg *config.Config, c ToolContext, tools []string) []string {
	allowed := SessionToolPolicy(cfg, c).Allowed(c.Role, tools)
	if !c.Role.Subagent && len(allowed) == len(tools) {
		return nil
	}
	return allowed
}
