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
		// The orchestrator (the main session): one turn spawns three
		// children and yields; their announces come back one per turn
		// (nothing to tell the human yet: NO_REPLY); a script cannot count
		// them, so the human asks for the summary, which reads the tree.
		map[string]any{"match": `^Plan the v2 release notes`, "tools": []any{
			spawn("collect-prs", "collect the merged PRs since v1"),
			spawn("draft-notes", "draft the release notes"),
			spawn("check-links", "check the links in the docs"),
			map[string]any{"name": "sessions_yield", "params": map[string]any{"message": "waiting for collect-prs, draft-notes and check-links"}},
		}},
		rule(`\[Internal task completion event\]`, "NO_REPLY"),
		map[string]any{"match": `^Summarize the children`, "tool": map[string]any{"name": "subagents", "params": map[string]any{"action": "list"}},
			"reply": "Summary: {{result.total}} sub-agents so far.\n{{result.text}}"},
		// A child: its task, and a human who writes to it directly.
		rule(`\[Subagent Task\]: (.*)`, "Done: {{1}}."),
		rule(`^Please also (.*)`, "Will do: {{1}}."),
		// the demo's cron job (a turn of its own every 30 s)
		rule(`^Anything need me\?$`, "All quiet: nothing needs you."),
		// A parent woken by a notice reconciles with session_status.
		map[string]any{"match": `^Session "(.*)" changed .*changesSince (\d+)\.`,
			"tool":  map[string]any{"name": "session_status", "params": map[string]any{"sessionKey": "{{1}}", "changesSince": "{{2}}"}},
			"reply": "Reconciled {{1}} at stateVersion {{result.stateVersion}}; its changes since {{2}}:\n{{result.stateChanges}}"},
	}
	c.Agents.List = []config.Agent{{ID: "main", Name: demoMainName, Runtime: "script", Script: map[string]any{"rules": rules}}}
}

// demoMainName names the demo's own main agent, which tells its config
// from one the user wrote.
const demoMainName = "demo main agent"

func rule(match, reply string) map[string]any {
	return map[string]any{"match": match, "reply": reply}
}

func spawn(label, task string) map[string]any {
	return map[string]any{"name": "sessions_spawn", "params": map[string]any{"task": task, "label": label}}
}
