package rules

import (
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

// sessions_search is opt-in: every profile, wildcard and group leaves it
// off; only its name in an allow list turns it on, and the later stages
// (deny, sub-agent lists) still apply.
func TestOptInToolNamedOnly(t *testing.T) {
	const tool = "sessions_search"
	optIn := `sessions_search is not available to any session until config names it (an opt-in tool: list "sessions_search" in tools.alsoAllow or tools.allow)`
	main := SessionRole{Role: RoleMain}
	leaf := ResolveSessionRole("agent:main:subagent:x", nil, "", 1)
	for _, tc := range []struct {
		name  string
		edit  func(*config.Config)
		agent string
		role  SessionRole
		want  string
	}{
		{"default", nil, "main", main, optIn},
		{"full", func(c *config.Config) { c.Tools.Profile = "full" }, "main", main, optIn},
		{"allow *", func(c *config.Config) { c.Tools.Allow = []string{"*"} }, "main", main, optIn},
		{"allow sessions_*", func(c *config.Config) { c.Tools.Allow = []string{"sessions_*"} }, "main", main, optIn},
		{"alsoAllow group:sessions", func(c *config.Config) { c.Tools.AlsoAllow = []string{"group:sessions"} }, "main", main, optIn},
		{"alsoAllow group:openclaw", func(c *config.Config) { c.Tools.AlsoAllow = []string{"group:openclaw"} }, "main", main, optIn},
		{"coding", func(c *config.Config) { c.Tools.Profile = "coding" }, "main", main,
			`sessions_search is not available to the "coding" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		{"messaging", func(c *config.Config) { c.Tools.Profile = "messaging" }, "main", main,
			`sessions_search is not available to the "messaging" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		{"coding, named in allow only", func(c *config.Config) {
			c.Tools.Profile = "coding"
			c.Tools.Allow = []string{"sessions_search"}
		}, "main", main, `sessions_search is not available to the "coding" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		{"alsoAllow", func(c *config.Config) { c.Tools.AlsoAllow = []string{"Sessions_Search"} }, "main", main, ""},
		{"allow", func(c *config.Config) { c.Tools.Allow = []string{"sessions_list", "sessions_search"} }, "main", main, ""},
		{"coding + alsoAllow", func(c *config.Config) {
			c.Tools.Profile = "coding"
			c.Tools.AlsoAllow = []string{"sessions_search"}
		}, "main", main, ""},
		{"minimal + alsoAllow", func(c *config.Config) {
			c.Tools.Profile = "minimal"
			c.Tools.AlsoAllow = []string{"sessions_search"}
		}, "main", main, ""},
		{"agent's allow", func(c *config.Config) {
			c.Agents.List = []config.Agent{{ID: "ops", Tools: &config.AgentTools{Allow: []string{"sessions_search"}}}}
		}, "ops", main, ""},
		{"another agent's allow", func(c *config.Config) {
			c.Agents.List = []config.Agent{{ID: "ops", Tools: &config.AgentTools{Allow: []string{"sessions_search"}}}}
		}, "main", main, optIn},
		{"agent's alsoAllow", func(c *config.Config) {
			c.Agents.List = []config.Agent{{ID: "ops", Tools: &config.AgentTools{AlsoAllow: []string{"sessions_search"}}}}
		}, "ops", main, ""},
		{"named, denied by group", func(c *config.Config) {
			c.Tools.AlsoAllow = []string{"sessions_search"}
			c.Tools.Deny = []string{"group:sessions"}
		}, "main", main, "sessions_search is not available to any session (tools.deny)"},
		{"named, leaf sub-agent", func(c *config.Config) { c.Tools.AlsoAllow = []string{"sessions_search"} }, "main", leaf,
			"sessions_search is not available to leaf sub-agent sessions (tools.subagents leaf deny list: depth 1 of agents.defaults.subagents.maxSpawnDepth 1)"},
		{"named, leaf sub-agent re-allowed", func(c *config.Config) {
			c.Tools.AlsoAllow = []string{"sessions_search"}
			c.Tools.Subagents.Tools.AlsoAllow = []string{"sessions_search"}
		}, "main", leaf, ""},
		{"named, orchestrator", func(c *config.Config) {
			c.Tools.AlsoAllow = []string{"sessions_search"}
			c.Agents.Defaults.Subagents.MaxSpawnDepth = 2
		}, "main", ResolveSessionRole("agent:main:subagent:x", nil, "", 2), ""},
	} {
		cfg := config.Default()
		if tc.edit != nil {
			tc.edit(cfg)
		}
		got := ""
		if d := ConfigToolPolicy(cfg, tc.agent).Check(tc.role, tool); d != nil {
			got = d.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
