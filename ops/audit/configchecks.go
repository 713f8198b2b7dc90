package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/rules"
)

// LongTokenTTL is the run-token lifetime above which the audit warns: the
// lifetime `sessionbus token` gives by default. A run's token is revoked
// when its turn returns, but one copied out of an exec runtime stays good
// until it expires if that revocation never comes (its gateway died).
const LongTokenTTL = bus.DefaultTokenTTL

// unlimitedQuota: a quota at rate 0 lets one runaway caller (a loop in an
// exec agent, a prompt-injected model) take the workers for every other
// caller; one finding per key, in key order.
func unlimitedQuota(t *Target) []Issue {
	if t.Config == nil {
		return nil
	}
	all, defaults := t.Config.Quotas.ByKey(), config.DefaultQuotas().ByKey()
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []Issue
	for _, k := range keys {
		if !all[k].Unlimited() {
			continue
		}
		d := defaults[k]
		out = append(out, Issue{
			Detail: fmt.Sprintf("%s has rate 0 (unlimited): one caller looping on its token can keep the workers busy for every other caller.", k),
			Fix:    fmt.Sprintf("%s: {rate: %g, burst: %d} (the default)", k, d.Rate, d.Burst),
		})
	}
	return out
}

// redactOff: logging.redactSensitive is off, so sessionbus's own log lines
// (which quote tool errors and an exec runtime's stderr) keep the secrets
// in them. OpenClaw rates the same setting a warning.
func redactOff(t *Target) []Issue {
	if t.Config == nil || !strings.EqualFold(strings.TrimSpace(t.Config.Logging.RedactSensitive), "off") {
		return nil
	}
	return []Issue{{
		Detail: "logging.redactSensitive is \"off\": worker and gateway log lines are written without masking API keys, tokens and passwords in them.",
		Fix:    `logging.redactSensitive: "tools"`,
	}}
}

// visibilityAllSandboxed: tools.sessions.visibility all while some agent
// runs sandboxed. The sandbox clamp (agents.defaults.sandbox.
// sessionToolsVisibility) narrows only the sandboxed sessions' own calls;
// every other session of those agents (their main one under non-main)
// sees every session, and with the clamp set to all so do the sandboxed.
func visibilityAllSandboxed(t *Target) []Issue {
	c := t.Config
	if c == nil || c.Tools.Sessions.Visibility != "all" {
		return nil
	}
	var sandboxed []string
	if m := c.Agents.Defaults.Sandbox.Mode; m != "" && m != config.SandboxOff {
		sandboxed = append(sandboxed, fmt.Sprintf("agents.defaults.sandbox.mode %q (every agent without its own)", m))
	}
	for _, a := range c.Agents.List {
		if a.Sandbox != nil && a.Sandbox.Mode != "" && a.Sandbox.Mode != config.SandboxOff {
			sandboxed = append(sandboxed, fmt.Sprintf("agents.list[%s].sandbox.mode %q", a.ID, a.Sandbox.Mode))
		}
	}
	if len(sandboxed) == 0 {
		return nil
	}
	detail := fmt.Sprintf("tools.sessions.visibility is \"all\" and %s: every session not sandboxed can list, read and send to every session (every agent's, with tools.agentToAgent.enabled); only the sandboxed sessions' own calls are clamped to their spawn tree.",
		strings.Join(sandboxed, ", "))
	if c.Agents.Defaults.Sandbox.SessionToolsVisibility == "all" {
		detail += " agents.defaults.sandbox.sessionToolsVisibility \"all\" turns the clamp off too."
	}
	return []Issue{{Detail: detail, Fix: `tools.sessions.visibility: "tree"`}}
}

// execProfileWide: an agent whose runtime is exec (a process the gateway
// starts, which may call the tools itself with its run token) may call
// more than the coding profile gives. Its tool policy is all that stands
// between a prompt-injected process and those tools.
func execProfileWide(t *Target) []Issue {
	if t.Config == nil {
		return nil
	}
	coding := rules.ProfileTools("coding")
	var out []Issue
	for _, a := range t.Config.Agents.List {
		if a.Runtime != "exec" {
			continue
		}
		p := rules.ConfigToolPolicy(t.Config, a.ID)
		fix := fmt.Sprintf("agents.list[%s].tools.profile: \"coding\"", a.ID)
		if rules.ProfileTools(p.Profile) == nil {
			name := "unset"
			if p.Profile != "" {
				name = fmt.Sprintf("%q", p.Profile)
			}
			out = append(out, Issue{
				Detail: fmt.Sprintf("Agent %s runs an exec runtime and its tool profile (%s) is %s: every tool, and every tool a later version adds.", a.ID, p.ProfileKey, name),
				Fix:    fix,
			})
			continue
		}
		var extra []string
		for _, tool := range schema.All() {
			if !slices.Contains(coding, tool.Name) && p.Check(rules.SessionRole{Role: rules.RoleMain}, tool.Name) == nil {
				extra = append(extra, tool.Name)
			}
		}
		if len(extra) > 0 {
			out = append(out, Issue{
				Detail: fmt.Sprintf("Agent %s runs an exec runtime and %s adds %s to its %q profile.", a.ID, p.AlsoAllowKey, strings.Join(extra, ", "), p.Profile),
				Fix:    fmt.Sprintf("remove %s from %s", strings.Join(extra, ", "), p.AlsoAllowKey),
			})
		}
	}
	return out
}

// longTokenTTL: a configured run timeout makes run tokens live longer
// than LongTokenTTL. A run's token lives for its timeout plus a minute
// (at most bus.MaxTokenTTL); the sub-agent run timeouts are the keys
// that set it.
func longTokenTTL(t *Target) []Issue {
	c := t.Config
	if c == nil {
		return nil
	}
	type knob struct {
		key  string
		secs int
	}
	knobs := []knob{{"agents.defaults.subagents.runTimeoutSeconds", c.Agents.Defaults.Subagents.RunTimeoutSeconds}}
	for _, a := range c.Agents.List {
		if a.Subagents != nil {
			knobs = append(knobs, knob{fmt.Sprintf("agents.list[%s].subagents.runTimeoutSeconds", a.ID), a.Subagents.RunTimeoutSeconds})
		}
	}
	limit := int((LongTokenTTL - time.Minute) / time.Second)
	var out []Issue
	for _, k := range knobs {
		if k.secs <= limit {
			continue
		}
		ttl := min(time.Duration(k.secs)*time.Second+time.Minute, bus.MaxTokenTTL)
		out = append(out, Issue{
			Detail: fmt.Sprintf("%s is %d: a sub-agent run's token then lives %s (its timeout plus a minute), longer than %s; one leaked from the run stays usable that long if its revocation is missed.", k.key, k.secs, ttl, LongTokenTTL),
			Fix:    fmt.Sprintf("%s: %d", k.key, limit),
		})
	}
	return out
}
