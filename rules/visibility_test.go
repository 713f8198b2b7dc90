package rules

import "testing"

func TestParseVisibility(t *testing.T) {
	tests := []struct {
		in   string
		want Visibility
		ok   bool
	}{
		{"self", VisibilitySelf, true},
		{"TREE", VisibilityTree, true},
		{" Agent ", VisibilityAgent, true},
		{"all", VisibilityAll, true},
		{"", VisibilityTree, true},
		{"everything", VisibilityTree, false},
		{"spawned", VisibilityTree, false},
	}
	for _, tt := range tests {
		got, ok := ParseVisibility(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseVisibility(%q) = (%q, %v), want (%q, %v)", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestEffectiveVisibility(t *testing.T) {
	tests := []struct {
		configured Visibility
		sandboxed  bool
		clamp      string
		want       Visibility
	}{
		{VisibilityAll, false, "", VisibilityAll},
		{VisibilitySelf, false, "spawned", VisibilitySelf},
		{VisibilityAll, true, "", VisibilityTree}, // default clamp is spawned
		{VisibilityAll, true, "spawned", VisibilityTree},
		{VisibilityAgent, true, "spawned", VisibilityTree},
		{VisibilitySelf, true, "spawned", VisibilityTree}, // the clamp widens self
		{VisibilityTree, true, "spawned", VisibilityTree},
		{VisibilitySelf, true, "all", VisibilitySelf},
		{VisibilityAll, true, "ALL", VisibilityAll},
		{VisibilityAll, true, "bogus", VisibilityTree}, // a typo keeps the sandbox closed
		{"", false, "", VisibilityTree},
		{"AGENT", false, "", VisibilityAgent},
	}
	for _, tt := range tests {
		if got := EffectiveVisibility(tt.configured, tt.sandboxed, tt.clamp); got != tt.want {
			t.Errorf("EffectiveVisibility(%q, %v, %q) = %q, want %q", tt.configured, tt.sandboxed, tt.clamp, got, tt.want)
		}
	}
}

func TestRestrictToSpawned(t *testing.T) {
	tests := []struct {
		sandboxed bool
		clamp     string
		requester string
		want      bool
	}{
		{true, "spawned", "agent:main:main", true},
		{true, "", "agent:main:main", true},
		{false, "spawned", "agent:main:main", false},
		{true, "all", "agent:main:main", false},
		{true, "spawned", "", false},
		{true, "spawned", "agent:main:subagent:x", false},
		{true, "spawned", "subagent:x", false},
	}
	for _, tt := range tests {
		if got := RestrictToSpawned(tt.sandboxed, tt.clamp, tt.requester); got != tt.want {
			t.Errorf("RestrictToSpawned(%v, %q, %q) = %v, want %v", tt.sandboxed, tt.clamp, tt.requester, got, tt.want)
		}
	}
}

func TestSandboxNotVisibleError(t *testing.T) {
	want := "Session not visible from this sandboxed agent session: agent:main:other"
	if got := SandboxNotVisibleError("agent:main:other"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestVisibilityWarning(t *testing.T) {
	tests := map[Visibility]string{
		VisibilitySelf:  "Session visibility is restricted (effective tools.sessions.visibility=self: only the current session). Sessions outside that scope are omitted from results and count.",
		VisibilityTree:  "Session visibility is restricted (effective tools.sessions.visibility=tree: current session + spawned sub-agents). Sessions outside that scope are omitted from results and count.",
		VisibilityAgent: "Session visibility is restricted (effective tools.sessions.visibility=agent: all sessions for this agent). Sessions outside that scope are omitted from results and count.",
		VisibilityAll:   "",
		"":              "Session visibility is restricted (effective tools.sessions.visibility=tree: current session + spawned sub-agents). Sessions outside that scope are omitted from results and count.",
	}
	for v, want := range tests {
		if got := VisibilityWarning(v); got != want {
			t.Errorf("VisibilityWarning(%q)\n got %q\nwant %q", v, got, want)
		}
	}
}
