package rules

import "strings"

// A2APolicy is tools.agentToAgent: whether sessions may reach sessions of
// other agents at all, and which agents may take part.
type A2APolicy struct {
	Enabled bool     // default false: cross-agent access is opt-in
	Allow   []string // agent id patterns; empty means every agent
}

// IsAllowed reports whether agents a and b may talk. An agent always reaches
// itself; otherwise the policy must be enabled and both ids must match Allow.
func (p A2APolicy) IsAllowed(a, b string) bool {
	if a == b {
		return true
	}
	if !p.Enabled {
		return false
	}
	return p.matches(a) && p.matches(b)
}

func (p A2APolicy) matches(agentID string) bool {
	if len(p.Allow) == 0 {
		return true
	}
	for _, pattern := range p.Allow {
		if matchAllowPattern(trim(pattern), agentID) {
			return true
		}
	}
	return false
}

// matchAllowPattern keeps upstream's asymmetry: a plain pattern is an exact,
// case-sensitive id, while a pattern with "*" is an anchored,
// case-insensitive glob. A blank pattern matches nothing (it is not "empty
// list").
func matchAllowPattern(pattern, agentID string) bool {
	switch {
	case pattern == "":
		return false
	case pattern == "*":
		return true
	case !strings.Contains(pattern, "*"):
		return pattern == agentID
	}
	return globMatch(strings.Split(strings.ToLower(pattern), "*"), strings.ToLower(agentID))
}

// globMatch matches literal parts separated by "*" wildcards. Taking the
// leftmost occurrence of each middle part is optimal, so no backtracking is
// needed.
func globMatch(parts []string, s string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}
