package config

import (
	"cmp"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/rules/sanitize"
)

var agentIDRe = regexp.MustCompile(`(?i)^[a-z0-9][a-z0-9_-]{0,63}$`)

// Validate rejects malformed values with an error naming the key and value;
// where OpenClaw itself falls back (visibility to tree, ping-pong turns
// clamped), it applies the fallback and logs a warning naming the key.
func (c *Config) Validate(log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if err := c.validateBus(); err != nil {
		return err
	}
	switch v := strings.ToLower(strings.TrimSpace(c.Tools.Sessions.Visibility)); v {
	case "self", "tree", "agent", "all":
		c.Tools.Sessions.Visibility = v
	default:
		log.Warn("invalid config value; using the default", "key", "tools.sessions.visibility", "value", c.Tools.Sessions.Visibility, "default", DefaultVisibility)
		c.Tools.Sessions.Visibility = DefaultVisibility
	}
	if t := c.Session.AgentToAgent.MaxPingPongTurns; t < 0 || t > MaxPingPongTurnsLimit {
		clamped := min(max(t, 0), MaxPingPongTurnsLimit)
		log.Warn("config value out of range 0-20; clamped", "key", "session.agentToAgent.maxPingPongTurns", "value", t, "used", clamped)
		c.Session.AgentToAgent.MaxPingPongTurns = clamped
	}
	switch c.Agents.Defaults.Sandbox.SessionToolsVisibility {
	case "", "spawned", "all":
	default:
		return fmt.Errorf("agents.defaults.sandbox.sessionToolsVisibility %q must be \"spawned\" or \"all\"", c.Agents.Defaults.Sandbox.SessionToolsVisibility)
	}
	if err := validSandboxMode("agents.defaults.sandbox.mode", c.Agents.Defaults.Sandbox.Mode); err != nil {
		return err
	}
	if err := validToolProfile("tools.profile", &c.Tools.Profile); err != nil {
		return err
	}
	if err := c.defaultSubagents(log); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, a := range c.Agents.List {
		key := fmt.Sprintf("agents.list[%d]", i)
		if !agentIDRe.MatchString(strings.TrimSpace(a.ID)) {
			return fmt.Errorf("%s.id %q must match [a-z0-9][a-z0-9_-]{0,63}", key, a.ID)
		}
		id := strings.ToLower(strings.TrimSpace(a.ID))
		if seen[id] {
			return fmt.Errorf("%s.id %q is listed twice", key, a.ID)
		}
		seen[id] = true
		c.Agents.List[i].ID = id
		switch a.Runtime {
		case "", "script", "exec", "openai":
		default:
			return fmt.Errorf("%s.runtime %q must be script, exec or openai", key, a.Runtime)
		}
		if a.Subagents != nil {
			if err := a.Subagents.validate(key + ".subagents"); err != nil {
				return err
			}
		}
		if a.Sandbox != nil {
			if err := validSandboxMode(key+".sandbox.mode", a.Sandbox.Mode); err != nil {
				return err
			}
		}
		if a.Tools != nil {
			if err := validToolProfile(key+".tools.profile", &c.Agents.List[i].Tools.Profile); err != nil {
				return err
			}
		}
	}
	if err := cmp.Or(c.validateRouting(), c.validateQueue()); err != nil {
		return err
	}
	if err := c.validateCatalog(); err != nil {
		return err
	}
	if err := c.validateModels(); err != nil {
		return err
	}
	if err := c.Quotas.validate(); err != nil {
		return err
	}
	if c.Session.SendPolicy != nil {
		if err := c.Session.SendPolicy.validate(); err != nil {
			return err
		}
	}
	if err := cmp.Or(c.validateThreadBindings(), c.Session.validateLifecycle(), c.Cron.validate()); err != nil {
		return err
	}
	if _, ok := c.DiskBudget(); !ok {
		// A malformed budget must not fall back on the 2gb
		// default the user never chose (it would evict archives they
		// meant to keep): no budget at all, said loudly.
		log.Warn("session.maintenance.maxDiskBytes is malformed: the disk budget is DISABLED, no archive or session is evicted; "+
			"set a size such as 2gb or 500mb", "key", "session.maintenance.maxDiskBytes", "value", c.Session.Maintenance.MaxDiskBytes)
	}
	c.Logging.RedactPatterns = usablePatterns(c.Logging.RedactPatterns, log)
	switch strings.ToLower(c.Logging.RedactSensitive) {
	case "", "off", "tools":
	default:
		return fmt.Errorf("logging.redactSensitive %q must be \"off\" or \"tools\"", c.Logging.RedactSensitive)
	}
	return nil
}

// defaultSubagents validates agents.defaults.subagents, flooring its
// maxConcurrent at 1 as OpenClaw does (a bound of 0 would queue every
// child forever), and warns of a per-agent maxConcurrent, which nothing
// reads: the bound is the fleet's.
func (c *Config) defaultSubagents(log *slog.Logger) error {
	if err := c.Agents.Defaults.Subagents.validate("agents.defaults.subagents"); err != nil {
		return err
	}
	if n := c.Agents.Defaults.Subagents.MaxConcurrent; n < 1 {
		log.Warn("config value below 1; using 1", "key", "agents.defaults.subagents.maxConcurrent", "value", n)
		c.Agents.Defaults.Subagents.MaxConcurrent = 1
	}
	for _, a := range c.Agents.List {
		if a.Subagents != nil && a.Subagents.MaxConcurrent != 0 {
			log.Warn("per-agent value ignored: the bound is the fleet's; set agents.defaults.subagents.maxConcurrent",
				"key", "agents.list["+a.ID+"].subagents.maxConcurrent")
		}
	}
	return nil
}

func (s Subagents) validate(key string) error {
	if s.MaxSpawnDepth < 0 {
		return fmt.Errorf("%s.maxSpawnDepth %d must be 0 or more", key, s.MaxSpawnDepth)
	}
	if s.MaxChildrenPerAgent < 0 {
		return fmt.Errorf("%s.maxChildrenPerAgent %d must be 0 or more", key, s.MaxChildrenPerAgent)
	}
	if s.RunTimeoutSeconds < 0 {
		return fmt.Errorf("%s.runTimeoutSeconds %d must be 0 or more", key, s.RunTimeoutSeconds)
	}
	return nil
}

// Tool profiles (tools.profile, agents.list[].tools.profile), OpenClaw's
// names; the tool set of each is in rules (toolpolicy.go).
var ToolProfiles = []string{"minimal", "coding", "messaging", "full"}

// validToolProfile lower-cases a set profile and refuses an unknown one:
// OpenClaw's schema refuses it too, and silently granting every tool for
// a misspelt "minimal" would widen what an agent may call.
func validToolProfile(key string, p *string) error {
	v := strings.ToLower(strings.TrimSpace(*p))
	if v == "" || slices.Contains(ToolProfiles, v) {
		*p = v
		return nil
	}
	return fmt.Errorf("%s %q must be minimal, coding, messaging or full (or unset: every tool)", key, *p)
}

func validSandboxMode(key, m string) error {
	switch m {
	case "", SandboxOff, SandboxNonMain, SandboxAll:
		return nil
	}
	return fmt.Errorf("%s %q must be \"off\", \"non-main\" or \"all\"", key, m)
}

func (p *SendPolicy) validate() error {
	switch strings.ToLower(p.Default) {
	case "", "allow", "deny":
	default:
		return fmt.Errorf("session.sendPolicy.default %q must be \"allow\" or \"deny\"", p.Default)
	}
	for i, r := range p.Rules {
		switch strings.ToLower(r.Action) {
		case "allow", "deny":
		default:
			return fmt.Errorf("session.sendPolicy.rules[%d].action %q must be \"allow\" or \"deny\"", i, r.Action)
		}
	}
	return nil
}

// DiskBudget is session.maintenance.maxDiskBytes in bytes, and false when
// the value is malformed (the budget is then disabled, not defaulted).
func (c *Config) DiskBudget() (int64, bool) {
	n, err := ParseBytes(c.Session.Maintenance.MaxDiskBytes)
	return n, err == nil
}

// ContextCache is bus.contextCacheBytes in bytes (0: no cache); unset is
// the default.
func (c *Config) ContextCache() (int64, error) {
	v := c.Bus.ContextCacheBytes
	if strings.TrimSpace(v) == "" {
		v = DefaultContextCacheBytes
	}
	n, err := ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("bus.contextCacheBytes %q: %v; set a size such as 64mb, or 0 to turn the cache off", c.Bus.ContextCacheBytes, err)
	}
	return n, nil
}

// ParseBytes reads sizes such as "2gb", "512mb", "1048576" (kb, mb, gb
// and tb are powers of 1024).
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			mult = u.m
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a size (use a number with an optional kb, mb, gb or tb suffix)")
	}
	return int64(n * float64(mult)), nil
}

// usablePatterns drops the logging.redactPatterns entries that OpenClaw
// ignores (an unsafe regex: nested repetition; or an invalid one), each
// with a warning naming it, and keeps the others in order. (Entries that
// are valid JavaScript but beyond RE2, such as back-references, are
// dropped the same way; the warning says the pattern masks nothing.)
func usablePatterns(ps []string, log *slog.Logger) []string {
	var kept []string
	for _, p := range ps {
		if err := sanitize.CheckPattern(p); err != nil {
			log.Warn("logging.redactPatterns entry ignored, as OpenClaw ignores it; the other patterns apply and text it would match is not masked by it",
				"key", "logging.redactPatterns", "pattern", p, "reason", err.Error())
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 && len(ps) == 0 {
		return ps
	}
	return kept
}

// validateBus checks the bus section: the settings a deployment's
// processes must agree on, each refused with what to write instead.
func (c *Config) validateBus() error {
	if !regexp.MustCompile(`^[a-zA-Z0-9_-]+$`).MatchString(c.Bus.Prefix) {
		return fmt.Errorf("bus.prefix %q must be one subject token of letters, digits, - or _", c.Bus.Prefix)
	}
	switch c.Bus.Replicas {
	case 1, 3, 5:
	default:
		return fmt.Errorf("bus.replicas %d must be 1, 3 or 5 (the replica count of new streams and buckets)", c.Bus.Replicas)
	}
	if c.Bus.MaxRunHops < 1 {
		return fmt.Errorf("bus.maxRunHops %d must be 1 or more", c.Bus.MaxRunHops)
	}
	for key, d := range map[string]time.Duration{"bus.runRecordMaxAge": c.Bus.RunRecordMaxAge, "bus.deliverMaxAge": c.Bus.DeliverMaxAge} {
		if d < time.Minute {
			return fmt.Errorf("%s %s must be a duration of at least 1m (such as 168h)", key, d)
		}
	}
	if c.Bus.AnnounceRetries < 1 {
		return fmt.Errorf("bus.announceRetries %d must be 1 or more", c.Bus.AnnounceRetries)
	}
	if d := c.Bus.SubagentSweepInterval; d < 100*time.Millisecond || d > time.Minute {
		return fmt.Errorf("bus.subagentSweepInterval %s must be a duration between 100ms and 1m (such as 2s)", d)
	}
	if _, err := c.ContextCache(); err != nil {
		return err
	}
	return nil
}
