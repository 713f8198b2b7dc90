package rules

import "testing"

func TestGuardMessages(t *testing.T) {
	const (
		req   = "agent:main:main"
		child = "agent:main:subagent:child"
		other = "agent:main:discord:group:1"
		cross = "agent:ops:main"
	)
	spawned := func(k string) bool { return k == child }
	enabled := A2APolicy{Enabled: true}
	tests := []struct {
		action Action
		vis    Visibility
		a2a    A2APolicy
		target string
		want   string // "" = allowed
	}{
		// self
		{ActionHistory, VisibilitySelf, A2APolicy{}, req, ""},
		{ActionHistory, VisibilitySelf, A2APolicy{}, child, "Session history visibility is restricted to the current session (tools.sessions.visibility=self)."},
		{ActionSend, VisibilitySelf, A2APolicy{}, child, "Session send visibility is restricted to the current session (tools.sessions.visibility=self)."},
		{ActionList, VisibilitySelf, A2APolicy{}, child, "Session list visibility is restricted to the current session (tools.sessions.visibility=self)."},
		{ActionStatus, VisibilitySelf, A2APolicy{}, child, "Session status visibility is restricted to the current session (tools.sessions.visibility=self)."},
		// tree
		{ActionHistory, VisibilityTree, A2APolicy{}, req, ""},
		{ActionHistory, VisibilityTree, A2APolicy{}, child, ""},
		{ActionHistory, VisibilityTree, A2APolicy{}, other, "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree)."},
		{ActionSend, VisibilityTree, A2APolicy{}, other, "Session send visibility is restricted to the current session tree (tools.sessions.visibility=tree)."},
		{ActionList, VisibilityTree, A2APolicy{}, other, "Session list visibility is restricted to the current session tree (tools.sessions.visibility=tree)."},
		{ActionStatus, VisibilityTree, A2APolicy{}, other, "Session status visibility is restricted to the current session tree (tools.sessions.visibility=tree)."},
		{ActionStatus, "", A2APolicy{}, other, "Session status visibility is restricted to the current session tree (tools.sessions.visibility=tree)."}, // zero value is tree
		// agent, all (same agent)
		{ActionHistory, VisibilityAgent, A2APolicy{}, other, ""},
		{ActionHistory, VisibilityAll, A2APolicy{}, other, ""},
		// cross-agent under a non-all visibility: the [B] (PR #90489) message, even with A2A on
		{ActionHistory, VisibilityAgent, enabled, cross, "Session history visibility is restricted. Set tools.sessions.visibility=all and tools.agentToAgent.enabled=true to allow cross-agent access; use tools.agentToAgent.allow to restrict permitted agent pairs."},
		{ActionSend, VisibilityTree, enabled, cross, "Session send visibility is restricted. Set tools.sessions.visibility=all and tools.agentToAgent.enabled=true to allow cross-agent access; use tools.agentToAgent.allow to restrict permitted agent pairs."},
		{ActionList, VisibilitySelf, A2APolicy{}, cross, "Session list visibility is restricted. Set tools.sessions.visibility=all and tools.agentToAgent.enabled=true to allow cross-agent access; use tools.agentToAgent.allow to restrict permitted agent pairs."},
		{ActionStatus, VisibilityTree, A2APolicy{}, cross, "Session status visibility is restricted. Set tools.sessions.visibility=all and tools.agentToAgent.enabled=true to allow cross-agent access; use tools.agentToAgent.allow to restrict permitted agent pairs."},
		// cross-agent under all, A2A disabled
		{ActionHistory, VisibilityAll, A2APolicy{}, cross, "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."},
		{ActionSend, VisibilityAll, A2APolicy{}, cross, "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends."},
		{ActionStatus, VisibilityAll, A2APolicy{}, cross, "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."},
		{ActionList, VisibilityAll, A2APolicy{}, cross, "Agent-to-agent listing is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent visibility."},
		// cross-agent under all, A2A enabled but not allowed
		{ActionHistory, VisibilityAll, A2APolicy{Enabled: true, Allow: []string{"main"}}, cross, "Agent-to-agent history denied by tools.agentToAgent.allow."},
		{ActionSend, VisibilityAll, A2APolicy{Enabled: true, Allow: []string{"main"}}, cross, "Agent-to-agent messaging denied by tools.agentToAgent.allow."},
		{ActionStatus, VisibilityAll, A2APolicy{Enabled: true, Allow: []string{"main"}}, cross, "Agent-to-agent status denied by tools.agentToAgent.allow."},
		{ActionList, VisibilityAll, A2APolicy{Enabled: true, Allow: []string{"main"}}, cross, "Agent-to-agent listing denied by tools.agentToAgent.allow."},
		// cross-agent allowed
		{ActionSend, VisibilityAll, enabled, cross, ""},
		{ActionSend, VisibilityAll, A2APolicy{Enabled: true, Allow: []string{"main", "o*"}}, cross, ""},
		// legacy bare keys belong to the default agent
		{ActionHistory, VisibilityAgent, A2APolicy{}, "discord:group:1", ""},
		// unknown action uses the list wording
		{"bogus", VisibilitySelf, A2APolicy{}, child, "Session list visibility is restricted to the current session (tools.sessions.visibility=self)."},
	}
	for _, tt := range tests {
		g := Guard{Action: tt.action, RequesterKey: req, Visibility: tt.vis, A2A: tt.a2a, IsSpawned: spawned}
		allowed, status, msg := g.Check(tt.target)
		if tt.want == "" {
			if !allowed || status != "" || msg != "" {
				t.Errorf("%s/%s %s: got (%v, %q, %q), want allowed", tt.action, tt.vis, tt.target, allowed, status, msg)
			}
			continue
		}
		if allowed || status != "forbidden" || msg != tt.want {
			t.Errorf("%s/%s %s:\n got (%v, %q, %q)\nwant (false, \"forbidden\", %q)", tt.action, tt.vis, tt.target, allowed, status, msg, tt.want)
		}
	}
}

func TestGuardTreeWithoutSpawnedFunc(t *testing.T) {
	g := Guard{Action: ActionHistory, RequesterKey: "agent:main:main", Visibility: VisibilityTree}
	if allowed, _, _ := g.Check("agent:main:subagent:x"); allowed {
		t.Error("nil IsSpawned must mean no children")
	}
	if allowed, _, _ := g.Check("agent:main:main"); !allowed {
		t.Error("the requester itself must be visible")
	}
}

func TestGuardRequesterCrossAgentFromSubagent(t *testing.T) {
	// A sub-agent of ops reaching main's session is cross-agent.
	g := Guard{Action: ActionSend, RequesterKey: "agent:ops:subagent:1", Visibility: VisibilityAll}
	_, _, msg := g.Check("agent:main:main")
	if want := "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends."; msg != want {
		t.Errorf("got %q, want %q", msg, want)
	}
}
