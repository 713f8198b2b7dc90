package config

import (
	"slices"
	"strings"
	"testing"
)

// The tool policy keys decode from an OpenClaw-shaped file, profiles are
// case-folded, and agents.list[].tools lands on its agent.
func TestToolPolicyKeys(t *testing.T) {
	p := write(t, "sessionbus.yaml", `
tools:
  profile: Messaging
  alsoAllow: [sessions_spawn]
  allow: ["group:sessions", agents_list]
  deny: [sessions_yield]
agents:
  list:
    - id: research
      tools: {profile: coding, alsoAllow: [agents_list], allow: ["sessions_*"], deny: [subagents]}
    - {id: main}
`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tools.Profile != "messaging" || !slices.Equal(c.Tools.AlsoAllow, []string{"sessions_spawn"}) ||
		!slices.Equal(c.Tools.Allow, []string{"group:sessions", "agents_list"}) || !slices.Equal(c.Tools.Deny, []string{"sessions_yield"}) {
		t.Fatalf("tools: %+v", c.Tools)
	}
	at := c.Agent("research").Tools
	if at == nil || at.Profile != "coding" || !slices.Equal(at.AlsoAllow, []string{"agents_list"}) ||
		!slices.Equal(at.Allow, []string{"sessions_*"}) || !slices.Equal(at.Deny, []string{"subagents"}) {
		t.Fatalf("agents.list[research].tools: %+v", at)
	}
	if c.Agent("main").Tools != nil {
		t.Fatalf("an agent without tools must have none: %+v", c.Agent("main").Tools)
	}
}

func TestToolProfileRefused(t *testing.T) {
	for body, want := range map[string]string{
		"tools: {profile: minimul}\n":                              `tools.profile "minimul" must be minimal, coding, messaging or full`,
		"agents:\n  list:\n    - {id: a, tools: {profile: all}}\n": `agents.list[0].tools.profile "all" must be minimal, coding, messaging or full`,
	} {
		_, err := Load(write(t, "sessionbus.yaml", body), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// The stages after the profile load from an OpenClaw-shaped file: the
// byProvider maps keep keys with dots, the sandbox lists keep unset apart
// from empty, and the channel group policies keep their ids.
func TestToolStageKeys(t *testing.T) {
	p := write(t, "sessionbus.yaml", `
tools:
  byProvider:
    openai/gpt-4.1: {deny: [agents_list]}
    Anthropic: {profile: Minimal, alsoAllow: [sessions_list]}
  sandbox:
    tools: {allow: [], deny: [subagents]}
channels:
  telegram:
    enabled: true
    groups:
      "-100.5": {tools: {deny: [sessions_send]}, toolsBySender: {"id:42": {allow: [session_status]}}}
agents:
  list:
    - id: research
      tools:
        byProvider: {openai: {allow: [sessions_list]}}
        sandbox: {tools: {alsoAllow: [agents_list]}}
`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := c.Tools.ByProvider["openai/gpt-4.1"]; !ok || !slices.Equal(e.Deny, []string{"agents_list"}) {
		t.Fatalf("tools.byProvider: %+v", c.Tools.ByProvider)
	}
	if e := c.Tools.ByProvider["anthropic"]; e.Profile != "minimal" || !slices.Equal(e.AlsoAllow, []string{"sessions_list"}) {
		t.Fatalf("tools.byProvider.anthropic: %+v", e)
	}
	if sb := c.Tools.Sandbox.Tools; sb.Allow == nil || len(sb.Allow) != 0 || sb.AlsoAllow != nil || !slices.Equal(sb.Deny, []string{"subagents"}) {
		t.Fatalf("tools.sandbox.tools (allow must be empty, not unset; alsoAllow unset): %#v", sb)
	}
	g, ok := c.Channels["telegram"].Groups["-100.5"]
	if !ok || g.Tools == nil || !slices.Equal(g.Tools.Deny, []string{"sessions_send"}) || !slices.Equal(g.ToolsBySender["id:42"].Allow, []string{"session_status"}) {
		t.Fatalf("channels: %+v", c.Channels)
	}
	at := c.Agent("research").Tools
	if at == nil || !slices.Equal(at.ByProvider["openai"].Allow, []string{"sessions_list"}) || at.Sandbox == nil ||
		!slices.Equal(at.Sandbox.Tools.AlsoAllow, []string{"agents_list"}) || at.Sandbox.Tools.Allow != nil {
		t.Fatalf("agents.list[research].tools: %+v", at)
	}
	if _, err := Load(write(t, "sessionbus.yaml", "tools:\n  byProvider:\n    openai: {profile: everything}\n"), nil); err == nil ||
		!strings.Contains(err.Error(), `tools.byProvider[openai].profile "everything" must be minimal, coding, messaging or full`) {
		t.Fatalf("a bad provider profile: %v", err)
	}
}
