package handlers

import (
	"strconv"
	"strings"

	"github.com/sessionbus/sessionbus/rules"
)

// Target resolution and control checks, shared by kill and steer.

// resolveTarget is OpenClaw's resolveSubagentTargetFromRuns: "last" (the
// newest), a 1-based index over [active…, recent…], a child session key
// (contains ':'), an exact label (case-insensitive), a unique label
// prefix, a unique run-id prefix. It returns the child or the error text.
func (c *subagentsCall) resolveTarget(token string) (*child, string) {
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, errSubagentMissing
	}
	if token == "last" {
		if len(c.children) == 0 {
			return nil, errSubagentUnknown
		}
		return c.children[0], ""
	}
	if isDigits(token) {
		active, recent := c.ordered()
		order := append(active, recent...)
		idx, err := strconv.Atoi(token)
		if err != nil || idx <= 0 || idx > len(order) {
			return nil, "Invalid subagent index: " + token
		}
		return order[idx-1], ""
	}
	if strings.Contains(token, ":") {
		for _, ch := range c.children {
			if ch.rec.ChildSessionKey == token {
				return ch, ""
			}
		}
		return nil, "Unknown subagent session: " + token
	}
	lowered := strings.ToLower(token)
	match := func(pred func(*child) bool) []*child {
		var out []*child
		for _, ch := range c.children {
			if pred(ch) {
				out = append(out, ch)
			}
		}
		return out
	}
	switch m := match(func(ch *child) bool { return strings.ToLower(ch.label()) == lowered }); {
	case len(m) == 1:
		return m[0], ""
	case len(m) > 1:
		return nil, "Ambiguous subagent label: " + token
	}
	switch m := match(func(ch *child) bool { return strings.HasPrefix(strings.ToLower(ch.label()), lowered) }); {
	case len(m) == 1:
		return m[0], ""
	case len(m) > 1:
		return nil, "Ambiguous subagent label prefix: " + token
	}
	switch m := match(func(ch *child) bool { return strings.HasPrefix(ch.rec.RunID, token) }); {
	case len(m) == 1:
		return m[0], ""
	case len(m) > 1:
		return nil, "Ambiguous subagent run id prefix: " + token
	}
	return nil, "Unknown subagent target: " + token
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// resolveOrOwnership resolves a kill/steer target. A child session key the
// caller does not control, but that is a registered sub-agent, is refused
// as not owned (forbidden) rather than unknown: the run exists, it is
// just someone else's.
func (c *subagentsCall) resolveOrOwnership(token string) (*child, *failure) {
	ch, msg := c.resolveTarget(token)
	if ch != nil {
		return ch, nil
	}
	if strings.Contains(token, ":") && c.d.Children.Get(strings.TrimSpace(token)) != nil {
		return nil, fail(rules.StatusForbidden, errSubagentNotOwned)
	}
	return nil, fail("error", msg)
}

// checkControl is OpenClaw's ownership check, then the leaf check.
func (c *subagentsCall) checkControl(ch *child) *failure {
	owner := rules.FirstNonEmpty(strings.TrimSpace(ch.rec.ControllerSessionKey), ch.rec.RequesterSessionKey)
	if owner != c.ctl.key {
		return fail(rules.StatusForbidden, errSubagentNotOwned)
	}
	if c.ctl.controlScope != controlScopeChildren {
		return fail(rules.StatusForbidden, errSubagentLeaf)
	}
	return nil
}
