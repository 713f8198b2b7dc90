package rules

// Action is what a tool wants to do with a target session; it selects the
// wording of the guard's denial messages.
type Action string

const (
	ActionHistory Action = "history"
	ActionSend    Action = "send"
	ActionList    Action = "list"
	ActionStatus  Action = "status"
)

// StatusForbidden is the returned-error status of every guard denial.
const StatusForbidden = "forbidden"

// Guard decides whether a requester may act on a target session under
// tools.sessions.visibility and tools.agentToAgent. Build one per tool call.
type Guard struct {
	Action       Action
	RequesterKey string
	Visibility   Visibility // the effective visibility (after EffectiveVisibility)
	A2A          A2APolicy
	// IsSpawned reports whether target is in the requester's spawned tree;
	// consulted only under tree visibility. Nil means no children.
	IsSpawned func(target string) bool
	// RequesterAgent, when set, is AgentIDFromKey(RequesterKey), computed
	// once by the caller instead of once per checked target.
	RequesterAgent string
}

// Check returns allowed, or a denial with status "forbidden" and OpenClaw's
// exact message. Cross-agent rules come first, so a cross-agent target
// under self/tree/agent gets the message that says how to open cross-agent
// access. Keys compare exactly, as upstream's do.
func (g Guard) Check(targetKey string) (allowed bool, status, errMsg string) {
	return g.CheckAgent(targetKey, AgentIDFromKey(targetKey))
}

// CheckAgent is Check for a target whose agent id the caller already knows
// (the session index parses every key once, not on every list call).
func (g Guard) CheckAgent(targetKey, targetAgent string) (allowed bool, status, errMsg string) {
	m := guardMessagesFor(g.Action)
	vis := g.Visibility.norm()
	requesterAgent := g.RequesterAgent
	if requesterAgent == "" {
		requesterAgent = AgentIDFromKey(g.RequesterKey)
	}
	deny := func(msg string) (bool, string, string) { return false, StatusForbidden, msg }

	if targetAgent != requesterAgent {
		switch {
		case vis != VisibilityAll:
			return deny(m.prefix + " visibility is restricted. Set tools.sessions.visibility=all and tools.agentToAgent.enabled=true to allow cross-agent access; use tools.agentToAgent.allow to restrict permitted agent pairs.")
		case !g.A2A.Enabled:
			return deny(m.a2aDisabled)
		case !g.A2A.IsAllowed(requesterAgent, targetAgent):
			return deny("Agent-to-agent " + m.a2aNoun + " denied by tools.agentToAgent.allow.")
		}
		return true, "", ""
	}
	if targetKey == g.RequesterKey {
		return true, "", ""
	}
	switch vis {
	case VisibilitySelf:
		return deny(m.prefix + " visibility is restricted to the current session (tools.sessions.visibility=self).")
	case VisibilityTree:
		if g.IsSpawned == nil || !g.IsSpawned(targetKey) {
			return deny(m.prefix + " visibility is restricted to the current session tree (tools.sessions.visibility=tree).")
		}
	}
	return true, "", ""
}

type guardMessages struct {
	prefix      string // "Session history", …
	a2aNoun     string // as in "Agent-to-agent <noun> denied by …"
	a2aDisabled string
}

// guardMessagesFor falls back to the list wording for an unknown action, as
// upstream's message helpers do.
func guardMessagesFor(a Action) guardMessages {
	switch a {
	case ActionHistory:
		return guardMessages{"Session history", "history",
			"Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."}
	case ActionSend:
		return guardMessages{"Session send", "messaging",
			"Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends."}
	case ActionStatus:
		return guardMessages{"Session status", "status",
			"Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."}
	}
	return guardMessages{"Session list", "listing",
		"Agent-to-agent listing is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent visibility."}
}
