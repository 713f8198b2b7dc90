package handlers_test

import (
	"errors"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

// policyCase is one call and the reply the tool policy must give it: want
// "" means the policy lets it through (the tool may still refuse it for
// its own reasons, but never with 403), else the exact 403 message.
type policyCase struct {
	as, tool, params, want string
}

func checkPolicy(t *testing.T, s *handlerstest.Stack, cases []policyCase) {
	t.Helper()
	for _, c := range cases {
		_, err := s.Call(c.as, c.tool, c.params)
		var be *bus.Error
		forbidden := errors.As(err, &be) && be.Code == bus.CodeForbidden
		switch {
		case c.want == "" && forbidden:
			t.Errorf("%s as %s: refused with 403 %q, want it allowed", c.tool, c.as, be.Message)
		case c.want != "" && (!forbidden || be.Message != c.want):
			t.Errorf("%s as %s: got %v, want 403 %q", c.tool, c.as, err, c.want)
		}
	}
}

const researchKey = "agent:research:main"

// Every deny path of the general stages, through the worker: the profile,
// alsoAllow, tools.allow/deny with group aliases and globs.
func TestToolPolicyProfiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*config.Config)
		cases []policyCase
	}{
		{"minimal", func(c *config.Config) { c.Tools.Profile = "minimal" }, []policyCase{
			{mainKey, "session_status", `{}`, ""},
			{mainKey, "sessions_list", `{}`, `sessions_list is not available to the "minimal" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
			{mainKey, "sessions_spawn", `{"task":"x"}`, `sessions_spawn is not available to the "minimal" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
			{mainKey, "agents_list", `{}`, `agents_list is not available to the "minimal" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		}},
		{"messaging", func(c *config.Config) { c.Tools.Profile = "messaging" }, []policyCase{
			{mainKey, "sessions_list", `{}`, ""},
			{mainKey, "sessions_history", `{"sessionKey":"main"}`, ""},
			{mainKey, "sessions_spawn", `{"task":"x"}`, `sessions_spawn is not available to the "messaging" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
			{mainKey, "subagents", `{}`, `subagents is not available to the "messaging" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
			{mainKey, "sessions_yield", `{}`, `sessions_yield is not available to the "messaging" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		}},
		{"messaging with alsoAllow (seed 000's example)", func(c *config.Config) {
			c.Tools.Profile = "messaging"
			c.Tools.AlsoAllow = []string{"sessions_spawn", "sessions_yield", "subagents"}
		}, []policyCase{
			{mainKey, "subagents", `{}`, ""},
			{mainKey, "sessions_spawn", `{"task":"x"}`, ""},
			{mainKey, "agents_list", `{}`, `agents_list is not available to the "messaging" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		}},
		{"coding", func(c *config.Config) { c.Tools.Profile = "coding" }, []policyCase{
			{mainKey, "subagents", `{}`, ""},
			{mainKey, "agents_list", `{}`, `agents_list is not available to the "coding" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		}},
		{"full", func(c *config.Config) { c.Tools.Profile = "full" }, []policyCase{
			{mainKey, "agents_list", `{}`, ""},
		}},
		{"deny group alias", func(c *config.Config) { c.Tools.Deny = []string{"group:sessions"} }, []policyCase{
			{mainKey, "agents_list", `{}`, ""},
			{mainKey, "sessions_list", `{}`, "sessions_list is not available to any session (tools.deny)"},
			{mainKey, "session_status", `{}`, "session_status is not available to any session (tools.deny)"},
		}},
		{"allow glob, deny wins", func(c *config.Config) {
			c.Tools.Allow = []string{"sessions_*"}
			c.Tools.Deny = []string{"sessions_send"}
		}, []policyCase{
			{mainKey, "sessions_list", `{}`, ""},
			{mainKey, "sessions_send", `{"sessionKey":"main","message":"x"}`, "sessions_send is not available to any session (tools.deny)"},
			{mainKey, "session_status", `{}`, "session_status is not available to any session (not in tools.allow)"},
		}},
		{"profile before allow", func(c *config.Config) {
			c.Tools.Profile = "minimal"
			c.Tools.Allow = []string{"group:openclaw"}
		}, []policyCase{
			{mainKey, "sessions_list", `{}`, `sessions_list is not available to the "minimal" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkPolicy(t, handlerstest.Start(t, tc.edit), tc.cases)
		})
	}
}

// agents.list[].tools: the agent's own profile and alsoAllow replace the
// global ones for its sessions only; its allow/deny narrow after the global
// lists; other agents keep the global policy.
func TestToolPolicyPerAgent(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Profile = "minimal"
		c.Tools.Deny = []string{"agents_list"}
		c.Agents.List = []config.Agent{
			{ID: "main"},
			{ID: "research", Tools: &config.AgentTools{Profile: "coding", AlsoAllow: []string{"agents_list"}, Deny: []string{"sessions_send"}}},
			{ID: "ops", Tools: &config.AgentTools{Allow: []string{"sessions_list"}}},
			{ID: "pager", Tools: &config.AgentTools{Profile: "messaging", Allow: []string{"group:sessions"}, Deny: []string{"session_*"}}},
		}
	})
	checkPolicy(t, s, []policyCase{
		// main: the global minimal profile
		{mainKey, "session_status", `{}`, ""},
		{mainKey, "sessions_list", `{}`, `sessions_list is not available to the "minimal" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		// research: its own coding profile
		{researchKey, "sessions_list", `{}`, ""},
		{researchKey, "subagents", `{}`, ""},
		{researchKey, "sessions_send", `{"sessionKey":"main","message":"x"}`, `sessions_send is not available to agent "research" (agents.list[].tools.deny)`},
		// its alsoAllow adds agents_list to the profile, but the global deny still wins
		{researchKey, "agents_list", `{}`, "agents_list is not available to any session (tools.deny)"},
		// ops: the global profile, then its allow list
		{"agent:ops:main", "session_status", `{}`, `session_status is not available to agent "ops" (not in agents.list[].tools.allow)`},
		{"agent:ops:main", "sessions_list", `{}`, `sessions_list is not available to the "minimal" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		// pager: messaging, group alias allow, glob deny
		{"agent:pager:main", "sessions_history", `{"sessionKey":"main"}`, ""},
		{"agent:pager:main", "session_status", `{}`, `session_status is not available to agent "pager" (agents.list[].tools.deny)`},
		{"agent:pager:main", "sessions_spawn", `{"task":"x"}`, `sessions_spawn is not available to the "messaging" tool profile (agents.list[pager].tools.profile; list it in tools.alsoAllow to add it)`},
	})
}

// The sub-agent stage runs after the general ones: a profile can take a
// tool from an orchestrator that §5.3 would leave it, and
// tools.subagents.tools.alsoAllow cannot give back what the profile took.
func TestToolPolicySubagentAfterProfile(t *testing.T) {
	s := spawnStack(t, func(c *config.Config) {
		c.Agents.Defaults.Subagents.MaxSpawnDepth = 2
		c.Tools.Profile = "messaging"
		c.Tools.AlsoAllow = []string{"sessions_spawn"}
		c.Tools.Subagents.Tools.AlsoAllow = []string{"subagents"}
	})
	res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x"}`)
	child := res["childSessionKey"].(string)
	if err := s.Worker.Deps.Index.Sync(bustestCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkPolicy(t, s, []policyCase{
		{child, "sessions_list", `{}`, ""},
		{child, "subagents", `{}`, `subagents is not available to the "messaging" tool profile (tools.profile; list it in tools.alsoAllow to add it)`},
		{child, "sessions_send", `{"sessionKey":"main","message":"x"}`, "sessions_send is not available to sub-agent sessions (tools.subagents deny list)"},
		{child, "session_status", `{}`, "session_status is not available to sub-agent sessions (tools.subagents deny list)"},
	})
}
