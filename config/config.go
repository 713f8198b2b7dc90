// Package config loads sessionbus configuration with viper: a file
// (sessionbus.yaml or .json), then SESSIONBUS_* environment variables. Keys
// keep OpenClaw's names, so an OpenClaw config section carries over as is.
package config

import (
	"strings"
	"time"
)

// Config is the whole configuration. Every key is documented in docs/config.md.
type Config struct {
	Bus     Bus     `mapstructure:"bus"`
	Tools   Tools   `mapstructure:"tools"`
	Session Session `mapstructure:"session"`
	Agents  Agents  `mapstructure:"agents"`
	Logging Logging `mapstructure:"logging"`
	Quotas  Quotas  `mapstructure:"quotas"`
	// Commands is OpenClaw's `commands` section, of which sessionbus reads
	// who owns the chat commands (the ingress's owner-only commands).
	Commands Commands `mapstructure:"commands"`
	// Cron is OpenClaw's cron section (scheduled turns).
	Cron Cron `mapstructure:"cron"`
	// Search is the transcript search's indexers (ops/search).
	Search Search `mapstructure:"search"`
	// Models is OpenClaw's provider catalog: context windows, reply
	// sizes and prices of the models turns run with.
	Models Models `mapstructure:"models"`
	// Messages is OpenClaw's `messages` section: its queue modes.
	Messages Messages `mapstructure:"messages"`
	// Channels is OpenClaw's `channels` section, of which sessionbus reads
	// the group tool policies. Filled by the loader from the raw map, like
	// agents.defaults.models: a group id may hold a dot.
	Channels map[string]Channel `mapstructure:"-"`
	// Bindings route inbound messages to agents (OpenClaw's top-level
	// `bindings`); the ingress reads them (package routing).
	Bindings []Binding `mapstructure:"bindings"`
}

// Binding is one `bindings[]` item: messages matching Match go to AgentID.
type Binding struct {
	AgentID string       `mapstructure:"agentId"`
	Match   BindingMatch `mapstructure:"match"`
}

// BindingMatch selects the messages of a binding. GuildID, TeamID and
// Roles are read so a Discord or Slack binding that names them never
// matches a message without them (inbound messages carry none).
type BindingMatch struct {
	Channel   string       `mapstructure:"channel"`
	AccountID string       `mapstructure:"accountId"`
	Peer      *BindingPeer `mapstructure:"peer"`
	GuildID   string       `mapstructure:"guildId"`
	TeamID    string       `mapstructure:"teamId"`
	Roles     []string     `mapstructure:"roles"`
}

// BindingPeer is `bindings[].match.peer`: a chat by kind and id ("*": any).
type BindingPeer struct {
	Kind string `mapstructure:"kind"`
	ID   string `mapstructure:"id"`
}

// Bus holds sessionbus's own keys (OpenClaw has no equivalent).
type Bus struct {
	Prefix   string `mapstructure:"prefix"`
	Replicas int    `mapstructure:"replicas"`
	// MaxRunHops bounds an agent-to-agent chain of runs (each run started
	// from inside another adds a hop), so two agents cannot echo forever.
	MaxRunHops int `mapstructure:"maxRunHops"`
	// RunRecordMaxAge is how long a run record outlives its last write
	// (the runs bucket's TTL) and DeliverMaxAge how long an outbound
	// delivery stays in SB_DELIVER for a channel adapter to read: both
	// grow with every run and would otherwise never shrink.
	RunRecordMaxAge time.Duration `mapstructure:"runRecordMaxAge"`
	DeliverMaxAge   time.Duration `mapstructure:"deliverMaxAge"`
	// AnnounceRetries is how many times the gateways try to deliver a
	// sub-agent's completion announce before recording it failed on the
	// child's registry record.
	AnnounceRetries int `mapstructure:"announceRetries"`
	// SubagentSweepInterval is how often each gateway sweeps the child
	// registry: run timeouts, half-done spawns, announces not delivered.
	SubagentSweepInterval time.Duration `mapstructure:"subagentSweepInterval"`
	// ContextCacheBytes bounds each gateway's cache of live sessions'
	// model contexts (a size such as 64mb; 0 turns it off): with it a
	// turn reads only the entries appended since the last one.
	ContextCacheBytes string `mapstructure:"contextCacheBytes"`
}

// Tools is OpenClaw's `tools` section.
type Tools struct {
	Sessions     ToolsSessions  `mapstructure:"sessions"`
	AgentToAgent AgentToAgent   `mapstructure:"agentToAgent"`
	Subagents    ToolsSubagents `mapstructure:"subagents"`
	Profile      string         `mapstructure:"profile"`
	AlsoAllow    []string       `mapstructure:"alsoAllow"`
	// Allow, when set, is the only tools any session may call (after the
	// profile); Deny takes tools away, and a deny always wins.
	Allow []string `mapstructure:"allow"`
	Deny  []string `mapstructure:"deny"`
	// ByProvider narrows the tools of sessions whose model is of a
	// provider ("openai") or is one model ("openai/gpt-4.1"). Filled by the
	// loader from the raw map: a model ref holds a dot as often as not.
	ByProvider map[string]ToolPolicy `mapstructure:"-"`
	// Sandbox is tools.sandbox: the tool gate of sandboxed sessions.
	Sandbox ToolsSandbox `mapstructure:"sandbox"`
}

// ToolPolicy is one tools.byProvider entry: a profile applied after the
// session's own, and allow/alsoAllow/deny applied after tools.allow/deny.
type ToolPolicy struct {
	Profile   string   `mapstructure:"profile"`
	Allow     []string `mapstructure:"allow"`
	AlsoAllow []string `mapstructure:"alsoAllow"`
	Deny      []string `mapstructure:"deny"`
}

// ToolsSandbox is tools.sandbox (and agents.list[].tools.sandbox).
type ToolsSandbox struct {
	// Tools lists are nil when unset, which is not the same as empty: an
	// unset allow or deny falls back on the built-in sandbox lists, an
	// empty allow allows every tool.
	Tools ToolList `mapstructure:"tools"`
}

// Channel is one channels.<channel> entry: its groups by group id ("*":
// every group without an entry of its own).
type Channel struct {
	Groups map[string]ChannelGroup `mapstructure:"groups"`
	// ThreadBindings overrides session.threadBindings for this channel.
	ThreadBindings *ChannelThreadBindings `mapstructure:"threadBindings"`
}

// ChannelGroup is channels.<channel>.groups.<groupId>: the tools of the
// group's sessions, and per sender (ToolsBySender, keyed "id:<senderId>" or
// "*"), which wins over Tools for a sender it names.
type ChannelGroup struct {
	Tools         *ToolList           `mapstructure:"tools"`
	ToolsBySender map[string]ToolList `mapstructure:"toolsBySender"`
}

// AgentTools is agents.list[].tools: an agent's own profile (instead of
// tools.profile), alsoAllow (instead of tools.alsoAllow), and allow/deny
// applied after the global ones.
type AgentTools struct {
	Profile   string   `mapstructure:"profile"`
	Allow     []string `mapstructure:"allow"`
	AlsoAllow []string `mapstructure:"alsoAllow"`
	Deny      []string `mapstructure:"deny"`
	// ByProvider is the agent's tools.byProvider, applied after the
	// agent's allow/deny (filled by the loader from the raw map).
	ByProvider map[string]ToolPolicy `mapstructure:"-"`
	// Sandbox is the agent's tools.sandbox: each list set here replaces
	// the global one.
	Sandbox *ToolsSandbox `mapstructure:"sandbox"`
}

// ToolsSubagents is `tools.subagents`: the tool set of sub-agent sessions.
type ToolsSubagents struct {
	Tools ToolList `mapstructure:"tools"`
}

// ToolList is an allow/alsoAllow/deny triple of tool names.
type ToolList struct {
	// Allow and AlsoAllow remove names from the base deny list of a
	// sub-agent; Deny adds names to it.
	Allow     []string `mapstructure:"allow"`
	AlsoAllow []string `mapstructure:"alsoAllow"`
	Deny      []string `mapstructure:"deny"`
}

// ToolsSessions is `tools.sessions`.
type ToolsSessions struct {
	Visibility string `mapstructure:"visibility"`
}

// AgentToAgent is `tools.agentToAgent`.
type AgentToAgent struct {
	Enabled bool     `mapstructure:"enabled"`
	Allow   []string `mapstructure:"allow"`
}

// Session is OpenClaw's `session` section.
type Session struct {
	MainKey string `mapstructure:"mainKey"`
	Scope   string `mapstructure:"scope"`
	// DMScope groups direct messages the ingress routes: main,
	// per-peer, per-channel-peer or per-account-channel-peer.
	DMScope string `mapstructure:"dmScope"`
	// IdentityLinks maps a canonical name to the peer ids (bare or
	// "<channel>:<id>") of one person, who then shares one DM session.
	IdentityLinks map[string][]string `mapstructure:"identityLinks"`
	SendPolicy    *SendPolicy         `mapstructure:"sendPolicy"`
	AgentToAgent  SessionAgentToAgent `mapstructure:"agentToAgent"`
	Maintenance   Maintenance         `mapstructure:"maintenance"`
	Notices       SessionNotices      `mapstructure:"notices"`
	// Reset is when a session's transcript starts over under the same key
	// (a new sessionId): OpenClaw's lifecycle, evaluated on the next human
	// message. ResetByType overrides it per chat type (direct, its legacy
	// alias dm, group, thread), ResetByChannel per channel (before both).
	Reset          SessionReset            `mapstructure:"reset"`
	ResetByType    map[string]SessionReset `mapstructure:"resetByType"`
	ResetByChannel map[string]SessionReset `mapstructure:"resetByChannel"`
	// ResetTriggers are the commands that reset a session from a human
	// message (OpenClaw's default /new and /reset).
	ResetTriggers []string `mapstructure:"resetTriggers"`
	// ThreadBindings are the defaults of thread-bound sub-agents
	// (sessions_spawn thread=true); channels.<channel>.threadBindings
	// overrides them per channel.
	ThreadBindings ThreadBindings `mapstructure:"threadBindings"`
}

// SessionReset is one reset policy (`session.reset`, and each member of
// resetByType and resetByChannel). A nil field is unset: an override
// takes it from session.reset, session.reset from OpenClaw's defaults.
type SessionReset struct {
	Mode        string `mapstructure:"mode"`
	AtHour      *int   `mapstructure:"atHour"`
	IdleMinutes *int   `mapstructure:"idleMinutes"`
}

// SessionNotices is `session.notices`, sessionbus's own: how parent
// notices are delivered.
type SessionNotices struct {
	// WakeSubagents wakes a sub-agent watcher with a run, as a main
	// session is woken, instead of only telling it on its next turn.
	WakeSubagents bool `mapstructure:"wakeSubagents"`
}

// SendPolicy is `session.sendPolicy`.
type SendPolicy struct {
	Default string           `mapstructure:"default"`
	Rules   []SendPolicyRule `mapstructure:"rules"`
}

// SendPolicyRule is one `session.sendPolicy.rules[]` item.
type SendPolicyRule struct {
	Action string          `mapstructure:"action"`
	Match  SendPolicyMatch `mapstructure:"match"`
}

// SendPolicyMatch selects sessions for a rule.
type SendPolicyMatch struct {
	Channel      string `mapstructure:"channel"`
	ChatType     string `mapstructure:"chatType"`
	KeyPrefix    string `mapstructure:"keyPrefix"`
	RawKeyPrefix string `mapstructure:"rawKeyPrefix"`
}

// SessionAgentToAgent is `session.agentToAgent`.
type SessionAgentToAgent struct {
	MaxPingPongTurns int `mapstructure:"maxPingPongTurns"`
}

// Maintenance is `session.maintenance`.
type Maintenance struct {
	// Mode is enforce (apply) or warn (log what would be done).
	Mode string `mapstructure:"mode"`
	// PruneAfter is the age (since the last update) past which an entry
	// is stale and pruned, its transcript archived first.
	PruneAfter string `mapstructure:"pruneAfter"`
	// MaxEntries caps the live entries; the least recently updated go.
	MaxEntries int `mapstructure:"maxEntries"`
	// ResetArchiveRetention is how long reset and delete archives stay
	// (false: kept until the disk budget evicts them).
	ResetArchiveRetention string `mapstructure:"resetArchiveRetention"`
	MaxDiskBytes          string `mapstructure:"maxDiskBytes"`
	// HighWaterBytes is what an over-budget cleanup brings usage down to
	// ("": 80% of maxDiskBytes), so it does not run again at once.
	HighWaterBytes string `mapstructure:"highWaterBytes"`
}

// Agents is OpenClaw's `agents` section.
type Agents struct {
	Defaults AgentDefaults `mapstructure:"defaults"`
	List     []Agent       `mapstructure:"list"`
}

// AgentDefaults is `agents.defaults`.
type AgentDefaults struct {
	Subagents Subagents `mapstructure:"subagents"`
	Sandbox   Sandbox   `mapstructure:"sandbox"`
	// Model is the default model ref ("provider/model") of agents that
	// name none; Models, when not empty, is the set of refs a session may
	// switch to (with optional aliases). Models is filled by the loader
	// from the raw map, not by Unmarshal: viper would split a ref such as
	// "openai/gpt-4.1" at its dot (see models.go).
	Model  string                `mapstructure:"model"`
	Models map[string]ModelEntry `mapstructure:"-"`
	// Compaction is when a session's context is summarized and how much
	// of it is kept verbatim.
	Compaction Compaction `mapstructure:"compaction"`
}

// Subagents is `agents.defaults.subagents` (and `agents.list[].subagents`).
type Subagents struct {
	MaxSpawnDepth       int      `mapstructure:"maxSpawnDepth"`
	MaxChildrenPerAgent int      `mapstructure:"maxChildrenPerAgent"`
	ArchiveAfterMinutes int      `mapstructure:"archiveAfterMinutes"`
	RunTimeoutSeconds   int      `mapstructure:"runTimeoutSeconds"`
	AllowAgents         []string `mapstructure:"allowAgents"`
	// Model and Thinking are the child's defaults when the spawn names
	// none (agents.list[].subagents, then agents.defaults.subagents).
	Model    string `mapstructure:"model"`
	Thinking string `mapstructure:"thinking"`
	// MaxConcurrent bounds the sub-agent runs running at once across every
	// gateway sharing the bus (read from agents.defaults only: the bound
	// is the fleet's, not an agent's); a child's run beyond it waits.
	MaxConcurrent int `mapstructure:"maxConcurrent"`
	// RequireAgentID makes sessions_spawn refuse a call without agentId;
	// a pointer so a per-agent false overrides a default true.
	RequireAgentID *bool `mapstructure:"requireAgentId"`
}

// Sandbox is `agents.defaults.sandbox`.
type Sandbox struct {
	SessionToolsVisibility string `mapstructure:"sessionToolsVisibility"`
	// Mode is which sessions of the agent run sandboxed: off, non-main
	// or all (a sub-agent session is never its agent's main session).
	// sessions_spawn reads it for its sandbox checks.
	Mode string `mapstructure:"mode"`
}

// Agent is one `agents.list[]` item.
type Agent struct {
	ID   string `mapstructure:"id"`
	Name string `mapstructure:"name"`
	// Default marks the agent unbound inbound messages go to (else the
	// first listed).
	Default   bool           `mapstructure:"default"`
	Runtime   string         `mapstructure:"runtime"`
	Model     string         `mapstructure:"model"`
	Subagents *Subagents     `mapstructure:"subagents"`
	Script    map[string]any `mapstructure:"script"`
	Exec      map[string]any `mapstructure:"exec"`
	OpenAI    map[string]any `mapstructure:"openai"`
	// Sandbox is agents.list[].sandbox (only mode is read per agent).
	Sandbox *Sandbox `mapstructure:"sandbox"`
	// Tools is agents.list[].tools, the agent's tool policy.
	Tools *AgentTools `mapstructure:"tools"`
}

// Commands is OpenClaw's `commands` section.
type Commands struct {
	// OwnerAllowFrom lists the senders who may run the owner-only chat
	// commands (/send): "<channel>:<id>", a bare "<id>" (any channel), or
	// "*" (anyone). Empty: nobody, as OpenClaw treats no sender as an owner
	// without it.
	OwnerAllowFrom []string `mapstructure:"ownerAllowFrom"`
}

// CommandOwner reports whether sender from on channel is listed in
// commands.ownerAllowFrom. The channel compares without case, the id as
// sent (ids such as Signal's are case-sensitive).
func (c *Config) CommandOwner(channel, from string) bool {
	channel = strings.ToLower(strings.TrimSpace(channel))
	from = strings.TrimSpace(from)
	if from == "" {
		return false
	}
	for _, raw := range c.Commands.OwnerAllowFrom {
		entry := strings.TrimSpace(raw)
		if entry == "*" || entry == from {
			return true
		}
		if ch, id, ok := strings.Cut(entry, ":"); ok && strings.EqualFold(ch, channel) && (id == from || id == "*") {
			return true
		}
	}
	return false
}

// Search configures the transcript search's indexers.
type Search struct {
	// IncludeTools indexes tool results too (their text, redacted as the
	// history shows it); off, only user and assistant text is searchable.
	IncludeTools bool `mapstructure:"includeTools"`
}

// Logging is OpenClaw's `logging` section.
type Logging struct {
	RedactSensitive string   `mapstructure:"redactSensitive"`
	RedactPatterns  []string `mapstructure:"redactPatterns"`
}

// SubagentsFor resolves the sub-agent settings of agentID: each key of
// agents.list[].subagents that is set wins over agents.defaults.subagents
// (numbers: set means non-zero; allowAgents: set means present, so an
// empty per-agent list allows no other agent; requireAgentId: set means
// present, so a per-agent false overrides a default true).
func (c *Config) SubagentsFor(agentID string) Subagents {
	out := c.Agents.Defaults.Subagents
	a := c.Agent(agentID)
	if a == nil || a.Subagents == nil {
		return out
	}
	s := a.Subagents
	if s.MaxSpawnDepth != 0 {
		out.MaxSpawnDepth = s.MaxSpawnDepth
	}
	if s.MaxChildrenPerAgent != 0 {
		out.MaxChildrenPerAgent = s.MaxChildrenPerAgent
	}
	if s.ArchiveAfterMinutes != 0 {
		out.ArchiveAfterMinutes = s.ArchiveAfterMinutes
	}
	if s.RunTimeoutSeconds != 0 {
		out.RunTimeoutSeconds = s.RunTimeoutSeconds
	}
	if s.AllowAgents != nil {
		out.AllowAgents = s.AllowAgents
	}
	if s.Model != "" {
		out.Model = s.Model
	}
	if s.Thinking != "" {
		out.Thinking = s.Thinking
	}
	if s.RequireAgentID != nil {
		out.RequireAgentID = s.RequireAgentID
	}
	return out
}

// Agent returns the agents.list item with id (ids are stored lower-case
// by Validate), nil when none.
func (c *Config) Agent(id string) *Agent {
	for i := range c.Agents.List {
		if c.Agents.List[i].ID == id {
			return &c.Agents.List[i]
		}
	}
	return nil
}

// SandboxModeFor is the sandbox mode of agentID: agents.list[].sandbox.mode,
// else agents.defaults.sandbox.mode, else "off".
func (c *Config) SandboxModeFor(agentID string) string {
	if a := c.Agent(agentID); a != nil && a.Sandbox != nil && a.Sandbox.Mode != "" {
		return a.Sandbox.Mode
	}
	if m := c.Agents.Defaults.Sandbox.Mode; m != "" {
		return m
	}
	return SandboxOff
}

// SandboxedSession reports whether a session of agentID runs sandboxed:
// agents.*.sandbox.mode all, or non-main for any session but the agent's
// main one.
func (c *Config) SandboxedSession(agentID string, isMain bool) bool {
	switch c.SandboxModeFor(agentID) {
	case SandboxAll:
		return true
	case SandboxNonMain:
		return !isMain
	}
	return false
}

// Sandbox modes (agents.*.sandbox.mode, OpenClaw's names): off, non-main
// (every session but the agent's main one runs sandboxed), all.
const (
	SandboxOff     = "off"
	SandboxNonMain = "non-main"
	SandboxAll     = "all"
)
