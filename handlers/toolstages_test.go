package handlers_test

import (
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The provider stage: tools.byProvider by model ref and by provider, the
// agent's own byProvider, for the session's model (its override, else its
// agent's default model); its profile narrows right after the profile.
func TestToolPolicyProviderStage(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.Defaults.Model = "openai/gpt-4o-mini"
		c.Tools.ByProvider = map[string]config.ToolPolicy{
			"openai/gpt-4.1": {Deny: []string{"agents_list"}},
			"openai":         {Allow: []string{"session_status", "sessions_*"}, AlsoAllow: []string{"subagents"}},
			"anthropic":      {Profile: "minimal", AlsoAllow: []string{"sessions_list"}},
		}
		c.Agents.List = []config.Agent{
			{ID: "main"},
			{ID: "claude", Model: "anthropic/claude-sonnet-4-5"},
			{ID: "pinned", Model: "openai/gpt-4.1", Tools: &config.AgentTools{ByProvider: map[string]config.ToolPolicy{
				"openai/gpt-4.1": {Deny: []string{"sessions_send"}},
			}}},
		}
	})
	// a session whose override is gpt-4.1 gets the model's entry, not the provider's
	s.Put(&sessions.Entry{Key: "agent:main:over", SessionID: "s-over"})
	s.Update("agent:main:over", func(e *sessions.Entry) {
		e.SetRare(func(r *sessions.RareFields) { r.ProviderOverride, r.ModelOverride = "openai", "gpt-4.1" })
	})
	checkPolicy(t, s, []policyCase{
		// main: the default model, provider openai: its allow list (with alsoAllow)
		{mainKey, "sessions_list", `{}`, ""},
		{mainKey, "subagents", `{}`, ""},
		{mainKey, "agents_list", `{}`, "agents_list is not available to sessions on model openai/gpt-4o-mini (not in tools.byProvider[openai].allow)"},
		// the override's model entry
		{"agent:main:over", "agents_list", `{}`, "agents_list is not available to sessions on model openai/gpt-4.1 (tools.byProvider[openai/gpt-4.1].deny)"},
		{"agent:main:over", "sessions_yield", `{}`, ""},
		// the provider profile, with its alsoAllow
		{"agent:claude:main", "session_status", `{}`, ""},
		{"agent:claude:main", "sessions_list", `{}`, ""},
		{"agent:claude:main", "sessions_history", `{"sessionKey":"main"}`,
			`sessions_history is not available to the "minimal" tool profile of this model (tools.byProvider[anthropic].profile; list it in tools.byProvider[anthropic].alsoAllow to add it)`},
		// the agent's own entry, after the global one
		{"agent:pinned:main", "sessions_send", `{"sessionKey":"main","message":"x"}`,
			"sessions_send is not available to sessions on model openai/gpt-4.1 (agents.list[pinned].tools.byProvider[openai/gpt-4.1].deny)"},
		{"agent:pinned:main", "agents_list", `{}`, "agents_list is not available to sessions on model openai/gpt-4.1 (tools.byProvider[openai/gpt-4.1].deny)"},
	})
}

// The group stage: channels.<channel>.groups.<id>.tools for a group
// session routed to that group, "*" for the others, and nothing for a
// direct session on the same channel.
func TestToolPolicyGroupStage(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Channels = map[string]config.Channel{"telegram": {Groups: map[string]config.ChannelGroup{
			"-100":  {Tools: &config.ToolList{Deny: []string{"sessions_send"}}},
			"*":     {Tools: &config.ToolList{Allow: []string{"session_status"}}},
			"-200":  {ToolsBySender: map[string]config.ToolList{"*": {Deny: []string{"sessions_list"}}}},
			"other": {},
		}}}
	})
	group := func(key, to string) {
		s.Put(&sessions.Entry{Key: key, SessionID: "s-" + to, ChatType: "group",
			DeliveryContext: &sessions.DeliveryContext{Channel: "telegram", To: to}})
	}
	group("agent:main:telegram:group:-100", "-100")
	group("agent:main:g2", "-300") // a group without an entry: "*"
	group("agent:main:g3", "-200")
	s.Put(&sessions.Entry{Key: "agent:main:dm", SessionID: "s-dm", ChatType: "direct",
		DeliveryContext: &sessions.DeliveryContext{Channel: "telegram", To: "-100"}})
	checkPolicy(t, s, []policyCase{
		{"agent:main:telegram:group:-100", "sessions_send", `{"sessionKey":"main","message":"x"}`,
			"sessions_send is not available to group -100 of telegram (channels.telegram.groups[-100].tools.deny)"},
		{"agent:main:telegram:group:-100", "sessions_list", `{}`, ""},
		{"agent:main:g2", "session_status", `{}`, ""},
		{"agent:main:g2", "sessions_list", `{}`, "sessions_list is not available to group -300 of telegram (not in channels.telegram.groups[*].tools.allow)"},
		{"agent:main:g3", "sessions_list", `{}`, "sessions_list is not available to group -200 of telegram (channels.telegram.groups[-200].toolsBySender[*].deny)"},
		{"agent:main:dm", "sessions_send", `{"sessionKey":"main","message":"x"}`, ""},
		{mainKey, "sessions_list", `{}`, ""},
	})
}

// The sandbox stage applies to sandboxed sessions only: by mode (non-main)
// or by the token's flag; OpenClaw's default allow list leaves out
// agents_list, alsoAllow gives it back, and an agent's own list replaces
// the global one.
func TestToolPolicySandboxStage(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.Defaults.Sandbox.Mode = config.SandboxNonMain
		c.Agents.List = []config.Agent{
			{ID: "main"},
			{ID: "ops", Tools: &config.AgentTools{Sandbox: &config.ToolsSandbox{Tools: config.ToolList{AlsoAllow: []string{"agents_list"}}}}},
			{ID: "strict", Tools: &config.AgentTools{Sandbox: &config.ToolsSandbox{Tools: config.ToolList{Deny: []string{"session_status"}}}}},
			{ID: "open", Tools: &config.AgentTools{Sandbox: &config.ToolsSandbox{Tools: config.ToolList{Allow: []string{}}}}},
		}
	})
	checkPolicy(t, s, []policyCase{
		{mainKey, "agents_list", `{}`, ""}, // the main session is not sandboxed under non-main
		{"agent:main:side", "agents_list", `{}`, "agents_list is not available to sandboxed sessions (not in tools.sandbox.tools.allow (default))"},
		{"agent:main:side", "sessions_list", `{}`, ""},
		{"agent:ops:side", "agents_list", `{}`, ""},
		{"agent:strict:side", "session_status", `{}`, "session_status is not available to sandboxed sessions (agents.list[strict].tools.sandbox.tools.deny)"},
		{"agent:open:side", "agents_list", `{}`, ""},
	})
	// a token minted sandboxed is sandboxed whatever the mode says
	s2 := handlerstest.Start(t, nil)
	if _, err := s2.CallAs(bus.Caller{SessionKey: mainKey, Sandboxed: true}, "agents_list", `{}`); code(err) != bus.CodeForbidden {
		t.Fatalf("agents_list under a sandboxed token: %v, want 403", err)
	}
	if _, err := s2.CallAs(bus.Caller{SessionKey: mainKey}, "agents_list", `{}`); err != nil {
		t.Fatalf("agents_list unsandboxed: %v", err)
	}
}
