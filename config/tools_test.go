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
