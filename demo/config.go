package demo

import "github.com/sessionbus/sessionbus/config"

// Configure gives `serve --demo` its scripted agent when the config lists
// none, and the settings the scenario shows: visibility `agent`, so the main
// session can message a group session of its own agent, and two ping-pong
// turns. A config that lists agents is left as it is.
func Configure(c *config.Config) {
	if len(c.Agents.List) > 0 {
		return
	}
	c.Tools.Sessions.Visibility = "agent"
	c.Session.AgentToAgent.MaxPingPongTurns = 2
	// The demo's depth-1 sub-agents list their own tree: that takes an
	// orchestrator (a leaf, the default maxSpawnDepth 1's children, may
	// not call sessions_list).
	c.Agents.Defaults.Subagents.MaxSpawnDepth = 2
	rules := []any{
		rule(`^When does v2 ship`, "v2 ships Friday."),
		rule(`^v2 ships (.*)`, "Thanks! I'll tell the team it ships {{1}}"),
		rule(`^Thanks!`, "Noted; the release-team channel will hear it from me."),
		rule(`^Agent-to-agent announce step`, "Release update: v2 ships Friday (confirmed with the main session)."),
	}
	c.Agents.List = []config.Agent{{ID: "main", Name: "demo main agent", Runtime: "script", Script: map[string]any{"rules": rules}}}
}

func rule(match, reply string) map[string]any {
	return map[string]any{"match": match, "reply": reply}
}
