package rules

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sessionbus/sessionbus/config"
)

// Tool policy stage names, as a Denial and the effective tool list
// (/tools, `sessionbus session tools`) name them.
const (
	StageProfile  = "profile"
	StageProvider = "provider"
	StageGlobal   = "global"
	StageAgent    = "agent"
	StageGroup    = "group"
	StageSandbox  = "sandbox"
	StageSubagent = "subagent"
)

// SandboxDefaultAllow and SandboxDefaultDeny are the tool lists of a
// sandboxed session when neither tools.sandbox.tools nor the agent's own
// set them: OpenClaw's defaults, with sessions_search beside the other
// session reads (a sandboxed caller searches its tree only). Of the tools
// this build serves, the allow list leaves out agents_list; the deny list names host and channel
// tools it does not serve, so a config written for OpenClaw means the same.
var (
	SandboxDefaultAllow = []string{"exec", "process", "read", "write", "edit", "apply_patch", "image",
		"sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "sessions_yield", "subagents", "session_status", "switch_model", "sessions_search"}
	SandboxDefaultDeny = []string{"browser", "canvas", "nodes", "cron", "gateway",
		"telegram", "whatsapp", "discord", "irc", "googlechat", "slack", "signal", "imessage", "line", "feishu", "matrix", "msteams"}
)

// ToolStage is one allow/deny stage of the pipeline after the profile: a
// deny always wins; an empty Allow restricts nothing. Who says whom the
// stage restricts, for the 403 text; the keys are the config keys to change.
type ToolStage struct {
	Stage    string
	Who      string
	Allow    []string
	AllowKey string
	Deny     []string
	DenyKey  string
}

func (st *ToolStage) check(tool, name string) *Denial {
	if st == nil {
		return nil
	}
	if matchAny(st.Deny, name) {
		return &Denial{Tool: tool, Stage: st.Stage, Key: st.DenyKey, Rule: fmt.Sprintf("%s (%s)", st.Who, st.DenyKey)}
	}
	if len(st.Allow) > 0 && !matchAny(st.Allow, name) {
		return &Denial{Tool: tool, Stage: st.Stage, Key: st.AllowKey, Rule: fmt.Sprintf("%s (not in %s)", st.Who, st.AllowKey)}
	}
	return nil
}

// ToolContext is what the stages after the profile read of a session.
type ToolContext struct {
	Key  string
	Role SessionRole
	// Provider and Model are the session's model: its override, else its
	// agent's default model. Empty: no provider stage applies.
	Provider, Model string
	// Channel and GroupID are a group session's route (empty for any
	// other session); SenderID is who sent the turn, when known.
	Channel, GroupID, SenderID string
	// Sandboxed: the session runs sandboxed (the sandbox stage applies).
	Sandboxed bool
}

// SessionFacts are what the tool policy reads of a stored session entry,
// handed over as a value so that rules knows nothing of storage or NATS
// (flows/facts reads them from a kv/sessions entry). The zero value is a
// session with no entry.
type SessionFacts struct {
	// SpawnDepth and SubagentRole are a sub-agent's stored depth and role.
	SpawnDepth   *int
	SubagentRole string
	// ChatType is the entry's chat type; OriginChatType its origin's.
	ChatType, OriginChatType string
	// ModelOverride and ProviderOverride are the session's model override
	// (session_status, a spawn's model).
	ModelOverride, ProviderOverride string
	// DeliveryChannel and DeliveryTo are its delivery route; LastChannel
	// and LastTo where its last message came from.
	DeliveryChannel, DeliveryTo string
	LastChannel, LastTo         string
}

// SessionToolContext builds a session's ToolContext from its stored facts
// and config. sandboxed is the caller token's flag, which config can only
// add to; sender is the turn's sender, "" when unknown.
func SessionToolContext(cfg *config.Config, key string, f SessionFacts, sandboxed bool, sender string) ToolContext {
	agentID := AgentIDFromKey(key)
	maxDepth := cfg.SubagentsFor(agentID).MaxSpawnDepth
	c := ToolContext{Key: key, Role: ResolveSessionRole(key, f.SpawnDepth, f.SubagentRole, maxDepth), SenderID: sender}
	alias := ResolveAlias(cfg.Session.MainKey, cfg.Session.Scope)
	c.Sandboxed = sandboxed || cfg.SandboxedSession(agentID, key == alias.MainSessionKey(agentID))
	c.Provider, c.Model = sessionModel(cfg, agentID, f)
	if t := FirstNonEmpty(normalizeChatType(f.ChatType), normalizeChatType(f.OriginChatType), ChatTypeFromKey(key)); t == ChatGroup || t == ChatChannel {
		c.Channel, c.GroupID = groupRoute(key, f)
	}
	return c
}

// sessionModel is the session's model: the entry's override
// (session_status, a spawn's model), else the agent's default model.
func sessionModel(cfg *config.Config, agentID string, f SessionFacts) (provider, model string) {
	switch {
	case f.ModelOverride != "" && f.ProviderOverride != "":
		// the model id may hold a slash of its own (openrouter's
		// "anthropic/claude-sonnet-4-5"): the provider is the override's
		return strings.ToLower(f.ProviderOverride), f.ModelOverride
	case f.ModelOverride != "":
		if ref, ok := config.ParseModelRef(f.ModelOverride, config.DefaultModelProvider); ok {
			return ref.Provider, ref.Model
		}
	}
	if ref, ok := config.ParseModelRef(cfg.AgentModel(agentID), config.DefaultModelProvider); ok {
		return ref.Provider, ref.Model
	}
	return "", ""
}

// groupRoute is the channel and group id of a group session: its route
// (where its last message came from), else what its key names
// ("<channel>:group:<id>").
func groupRoute(key string, f SessionFacts) (channel, groupID string) {
	if f.DeliveryChannel != "" && f.DeliveryTo != "" {
		return strings.ToLower(f.DeliveryChannel), f.DeliveryTo
	}
	if f.LastChannel != "" && f.LastTo != "" {
		return strings.ToLower(f.LastChannel), f.LastTo
	}
	parts := nonEmptySegments(restOrRaw(key))
	if len(parts) >= 3 && (parts[1] == "group" || parts[1] == "channel") {
		return strings.ToLower(parts[0]), strings.Join(parts[2:], ":")
	}
	return "", ""
}

// SessionToolPolicy is the whole pipeline for one session: the agent's
// policy (ConfigToolPolicy) with the provider, group and sandbox stages
// that session's model, route and sandboxing select.
func SessionToolPolicy(cfg *config.Config, c ToolContext) ToolPolicy {
	agentID := AgentIDFromKey(c.Key)
	p := ConfigToolPolicy(cfg, agentID)
	p.providerStages(cfg, agentID, c)
	p.Group = groupStage(cfg, c)
	if c.Sandboxed {
		p.Sandbox = sandboxStage(cfg, agentID)
	}
	return p
}

// lookupProvider finds the byProvider entry of a model: "provider/model"
// first, then the provider, keys compared without case (the loader folds
// them). The key is returned for the denial texts.
func lookupProvider(m map[string]config.ToolPolicy, provider, model string) (string, *config.ToolPolicy) {
	if provider == "" {
		return "", nil
	}
	for _, k := range []string{strings.ToLower(provider + "/" + model), strings.ToLower(provider)} {
		if e, ok := m[k]; ok {
			return k, &e
		}
	}
	return "", nil
}

// providerStages fills the provider profile (the agent's byProvider
// profile, else the global one) and the two provider allow/deny stages
// (global after tools.allow/deny, the agent's after the agent's), in
// OpenClaw's order.
func (p *ToolPolicy) providerStages(cfg *config.Config, agentID string, c ToolContext) {
	gk, g := lookupProvider(cfg.Tools.ByProvider, c.Provider, c.Model)
	var ak string
	var a *config.ToolPolicy
	if at := agentTools(cfg, agentID); at != nil {
		ak, a = lookupProvider(at.ByProvider, c.Provider, c.Model)
	}
	who := fmt.Sprintf("sessions on model %s/%s", c.Provider, c.Model)
	agentKey := fmt.Sprintf("agents.list[%s].tools.byProvider[%s]", agentID, ak)
	globalKey := fmt.Sprintf("tools.byProvider[%s]", gk)
	switch {
	case a != nil && a.Profile != "":
		p.ProviderProfile, p.ProviderProfileKey = a.Profile, agentKey+".profile"
	case g != nil && g.Profile != "":
		p.ProviderProfile, p.ProviderProfileKey = g.Profile, globalKey+".profile"
	}
	switch {
	case a != nil && a.AlsoAllow != nil:
		p.ProviderAlsoAllow, p.ProviderAlsoAllowKey = a.AlsoAllow, agentKey+".alsoAllow"
	case g != nil && g.AlsoAllow != nil:
		p.ProviderAlsoAllow, p.ProviderAlsoAllowKey = g.AlsoAllow, globalKey+".alsoAllow"
	default:
		p.ProviderAlsoAllowKey = globalKey + ".alsoAllow"
		if g == nil {
			p.ProviderAlsoAllowKey = fmt.Sprintf("tools.byProvider[%s].alsoAllow", c.Provider)
		}
	}
	if g != nil {
		p.GlobalProvider = policyStage(StageProvider, who, globalKey, g)
	}
	if a != nil {
		p.AgentProvider = policyStage(StageProvider, who, agentKey, a)
	}
}

// policyStage is the allow/deny stage of a byProvider entry: alsoAllow
// adds to a set allow list, and alone restricts nothing.
func policyStage(stage, who, key string, e *config.ToolPolicy) *ToolStage {
	st := &ToolStage{Stage: stage, Who: who, Deny: e.Deny, DenyKey: key + ".deny", AllowKey: key + ".allow"}
	if len(e.Allow) > 0 {
		st.Allow = append(append([]string{}, e.Allow...), e.AlsoAllow...)
	}
	return st
}

func agentTools(cfg *config.Config, agentID string) *config.AgentTools {
	if a := cfg.Agent(agentID); a != nil {
		return a.Tools
	}
	return nil
}

// groupStage is the group tool policy of a group session, OpenClaw's
// order: the group's toolsBySender entry for the sender, the group's tools,
// the "*" group's toolsBySender entry, the "*" group's tools. Group ids and
// sender keys compare without case (the loader folds them).
func groupStage(cfg *config.Config, c ToolContext) *ToolStage {
	if c.Channel == "" || c.GroupID == "" {
		return nil
	}
	ch, ok := cfg.Channels[c.Channel]
	if !ok {
		return nil
	}
	who := fmt.Sprintf("group %s of %s", c.GroupID, c.Channel)
	for _, gid := range []string{strings.ToLower(c.GroupID), "*"} {
		g, ok := ch.Groups[gid]
		if !ok {
			continue
		}
		base := fmt.Sprintf("channels.%s.groups[%s]", c.Channel, gid)
		if sk, l := senderPolicy(g.ToolsBySender, c.SenderID); l != nil {
			return listStage(StageGroup, who, fmt.Sprintf("%s.toolsBySender[%s]", base, sk), l)
		}
		if g.Tools != nil {
			return listStage(StageGroup, who, base+".tools", g.Tools)
		}
	}
	return nil
}

// senderPolicy finds the toolsBySender entry of a sender: "id:<sender>",
// a legacy unprefixed "<sender>", then "*".
func senderPolicy(m map[string]config.ToolList, sender string) (string, *config.ToolList) {
	var keys []string
	if s := strings.ToLower(strings.TrimSpace(sender)); s != "" {
		keys = append(keys, "id:"+s, s)
	}
	for _, k := range append(keys, "*") {
		if l, ok := m[k]; ok {
			return k, &l
		}
	}
	return "", nil
}

func listStage(stage, who, key string, l *config.ToolList) *ToolStage {
	return policyStage(stage, who, key, &config.ToolPolicy{Allow: l.Allow, AlsoAllow: l.AlsoAllow, Deny: l.Deny})
}

// sandboxStage is the sandbox tool gate, OpenClaw's resolution: each of
// allow, alsoAllow and deny is the agent's list when set, else
// tools.sandbox.tools's, else the default; an empty allow allows every
// tool, alsoAllow adds to the allow list, and the default deny list spares
// the tools an explicit allow names.
func sandboxStage(cfg *config.Config, agentID string) *ToolStage {
	var agent *config.ToolList
	if at := agentTools(cfg, agentID); at != nil && at.Sandbox != nil {
		agent = &at.Sandbox.Tools
	}
	global := cfg.Tools.Sandbox.Tools
	pick := func(field string, a, g []string) ([]string, string) {
		switch {
		case a != nil:
			return a, fmt.Sprintf("agents.list[%s].tools.sandbox.tools.%s", agentID, field)
		case g != nil:
			return g, "tools.sandbox.tools." + field
		}
		return nil, ""
	}
	var aAllow, aAlso, aDeny []string
	if agent != nil {
		aAllow, aAlso, aDeny = agent.Allow, agent.AlsoAllow, agent.Deny
	}
	allow, allowKey := pick("allow", aAllow, global.Allow)
	also, _ := pick("alsoAllow", aAlso, global.AlsoAllow)
	deny, denyKey := pick("deny", aDeny, global.Deny)
	st := &ToolStage{Stage: StageSandbox, Who: "sandboxed sessions", AllowKey: allowKey, DenyKey: denyKey}
	switch {
	case allow == nil:
		st.Allow, st.AllowKey = append(append([]string{}, SandboxDefaultAllow...), also...), "tools.sandbox.tools.allow (default)"
	case len(allow) > 0:
		st.Allow = append(append([]string{}, allow...), also...)
	}
	if deny != nil {
		st.Deny = deny
		return st
	}
	explicit := append(append([]string{}, allow...), also...)
	for _, t := range SandboxDefaultDeny {
		if !matchAny(explicit, t) {
			st.Deny = append(st.Deny, t)
		}
	}
	st.DenyKey = "tools.sandbox.tools.deny (default)"
	return st
}

// ToolVerdict is one tool of a session's effective tool list: allowed, or
// the stage and key that removed it.
type ToolVerdict struct {
	Tool    string `json:"tool"`
	Allowed bool   `json:"allowed"`
	Stage   string `json:"stage,omitempty"`
	Key     string `json:"key,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// EffectiveTools is the verdict on each of tools (sorted by name) for the
// session c describes.
func EffectiveTools(cfg *config.Config, c ToolContext, tools []string) []ToolVerdict {
	p := SessionToolPolicy(cfg, c)
	names := append([]string{}, tools...)
	sort.Strings(names)
	out := make([]ToolVerdict, 0, len(names))
	for _, t := range names {
		v := ToolVerdict{Tool: t, Allowed: true}
		if d := p.Check(c.Role, t); d != nil {
			v = ToolVerdict{Tool: t, Stage: d.Stage, Key: d.Key, Reason: d.Error()}
		}
		out = append(out, v)
	}
	return out
}

// FormatToolList is the effective tool list as a human reads it in chat
// and on a terminal: allowed tools, then each missing one with its stage
// and key.
func FormatToolList(key string, vs []ToolVerdict) string {
	var allowed, removed []string
	for _, v := range vs {
		if v.Allowed {
			allowed = append(allowed, v.Tool)
			continue
		}
		removed = append(removed, fmt.Sprintf("  %s: removed by the %s stage (%s)", v.Tool, v.Stage, v.Key))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Tools of %s: %d of %d allowed\n", key, len(allowed), len(vs))
	if len(allowed) > 0 {
		b.WriteString("Allowed: " + strings.Join(allowed, ", ") + "\n")
	} else {
		b.WriteString("Allowed: none\n")
	}
	if len(removed) > 0 {
		b.WriteString("Not allowed:\n" + strings.Join(removed, "\n") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
