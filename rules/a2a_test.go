package rules

import "testing"

func TestA2APolicyIsAllowed(t *testing.T) {
	tests := []struct {
		name string
		p    A2APolicy
		a, b string
		want bool
	}{
		{"same agent even when disabled", A2APolicy{}, "main", "main", true},
		{"disabled", A2APolicy{Allow: []string{"*"}}, "main", "ops", false},
		{"enabled, empty list allows all", A2APolicy{Enabled: true}, "main", "ops", true},
		{"star", A2APolicy{Enabled: true, Allow: []string{"*"}}, "main", "ops", true},
		{"exact both", A2APolicy{Enabled: true, Allow: []string{"main", "ops"}}, "main", "ops", true},
		{"exact one missing", A2APolicy{Enabled: true, Allow: []string{"main"}}, "main", "ops", false},
		{"exact is case-sensitive", A2APolicy{Enabled: true, Allow: []string{"main", "Ops"}}, "main", "ops", false},
		{"exact trims pattern", A2APolicy{Enabled: true, Allow: []string{" main ", "ops"}}, "main", "ops", true},
		{"glob prefix", A2APolicy{Enabled: true, Allow: []string{"team-*"}}, "team-a", "team-b", true},
		{"glob is case-insensitive", A2APolicy{Enabled: true, Allow: []string{"TEAM-*"}}, "team-a", "team-b", true},
		{"glob anchored", A2APolicy{Enabled: true, Allow: []string{"team-*"}}, "team-a", "xteam-b", false},
		{"glob suffix", A2APolicy{Enabled: true, Allow: []string{"*-bot"}}, "ci-bot", "qa-bot", true},
		{"glob suffix anchored", A2APolicy{Enabled: true, Allow: []string{"*-bot"}}, "ci-bot", "qa-bots", false},
		{"glob middle", A2APolicy{Enabled: true, Allow: []string{"a*b*c"}}, "abc", "axxbyyc", true},
		{"glob middle order", A2APolicy{Enabled: true, Allow: []string{"a*b*c"}}, "abc", "acb", false},
		{"glob overlapping parts", A2APolicy{Enabled: true, Allow: []string{"ab*ab"}}, "ab", "abab", false},
		{"glob overlapping parts ok", A2APolicy{Enabled: true, Allow: []string{"ab*ab"}}, "abab", "abxab", true},
		{"glob dot is literal", A2APolicy{Enabled: true, Allow: []string{"a.*"}}, "a.x", "abx", false},
		{"blank pattern matches nothing", A2APolicy{Enabled: true, Allow: []string{" "}}, "main", "ops", false},
		{"mixed patterns", A2APolicy{Enabled: true, Allow: []string{"main", "ops-*"}}, "main", "ops-eu", true},
	}
	for _, tt := range tests {
		if got := tt.p.IsAllowed(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: IsAllowed(%q, %q) = %v, want %v", tt.name, tt.a, tt.b, got, tt.want)
		}
	}
}
