package config

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// ThreadBindings is OpenClaw's `threadBindings`, at `session.threadBindings`
// (the defaults) and at `channels.<channel>.threadBindings` (a channel's
// overrides): whether a sub-agent spawned with thread=true may bind the
// requester's conversation, and when a binding expires. A nil field is
// unset: a channel's falls back on the session's, the session's on
// OpenClaw's default.
type ThreadBindings struct {
	Enabled *bool `mapstructure:"enabled"`
	// IdleHours unbinds after that long without a message in the thread
	// (0: never). MaxAgeHours unbinds that long after the bind (0: never).
	IdleHours   *float64 `mapstructure:"idleHours"`
	MaxAgeHours *float64 `mapstructure:"maxAgeHours"`
	// SpawnSessions lets sessions_spawn bind threads.
	SpawnSessions *bool `mapstructure:"spawnSessions"`
	// DefaultSpawnContext is the context of a thread-bound spawn that
	// names none: fork (a copy of the requester's transcript) or isolated.
	DefaultSpawnContext string `mapstructure:"defaultSpawnContext"`
}

// ChannelThreadBindings is `channels.<channel>.threadBindings`: the
// session's keys, and spawnSubagentSessions, which overrides spawnSessions
// for sub-agent spawns on that channel.
type ChannelThreadBindings struct {
	ThreadBindings        `mapstructure:",squash"`
	SpawnSubagentSessions *bool `mapstructure:"spawnSubagentSessions"`
}

// OpenClaw's defaults of threadBindings.
const (
	DefaultThreadBindingIdleHours   = 24
	DefaultThreadBindingMaxAgeHours = 0
	DefaultSpawnContext             = "fork"
)

// ThreadBindingPolicy is the threadBindings settings in force for one
// channel: its overrides over session.threadBindings over the defaults.
type ThreadBindingPolicy struct {
	Enabled      bool
	SpawnEnabled bool
	// DefaultSpawnContext is fork or isolated.
	DefaultSpawnContext string
	// IdleTimeout and MaxAge are 0 when they never expire a binding.
	IdleTimeout, MaxAge time.Duration
}

// IdleMs is IdleTimeout in ms (0 for a nil policy).
func (p *ThreadBindingPolicy) IdleMs() int64 {
	if p == nil {
		return 0
	}
	return p.IdleTimeout.Milliseconds()
}

// MaxAgeMs is MaxAge in ms (0 for a nil policy).
func (p *ThreadBindingPolicy) MaxAgeMs() int64 {
	if p == nil {
		return 0
	}
	return p.MaxAge.Milliseconds()
}

// ThreadBindingsFor resolves the policy of channel (lower-case) as OpenClaw's
// resolveThreadBindingSpawnPolicy does for a sub-agent spawn: the channel's
// spawnSubagentSessions, else its spawnSessions, else the session's.
func (c *Config) ThreadBindingsFor(channel string) ThreadBindingPolicy {
	s := c.Session.ThreadBindings
	var ch ChannelThreadBindings
	if cc, ok := c.Channels[strings.ToLower(channel)]; ok && cc.ThreadBindings != nil {
		ch = *cc.ThreadBindings
	}
	p := ThreadBindingPolicy{
		Enabled:             firstBool(true, ch.Enabled, s.Enabled),
		SpawnEnabled:        firstBool(true, ch.SpawnSubagentSessions, ch.SpawnSessions, s.SpawnSessions),
		DefaultSpawnContext: DefaultSpawnContext,
		IdleTimeout:         hours(firstFloat(DefaultThreadBindingIdleHours, ch.IdleHours, s.IdleHours)),
		MaxAge:              hours(firstFloat(DefaultThreadBindingMaxAgeHours, ch.MaxAgeHours, s.MaxAgeHours)),
	}
	for _, v := range []string{ch.DefaultSpawnContext, s.DefaultSpawnContext} {
		if v = strings.ToLower(strings.TrimSpace(v)); v != "" {
			p.DefaultSpawnContext = v
			break
		}
	}
	return p
}

func (t ThreadBindings) validate(key string) error {
	for name, v := range map[string]*float64{"idleHours": t.IdleHours, "maxAgeHours": t.MaxAgeHours} {
		if v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
			return fmt.Errorf("%s.%s %v must be a number of hours, 0 or more (0: never expires)", key, name, *v)
		}
	}
	switch strings.ToLower(strings.TrimSpace(t.DefaultSpawnContext)) {
	case "", "fork", "isolated":
	default:
		return fmt.Errorf("%s.defaultSpawnContext %q must be \"fork\" or \"isolated\"", key, t.DefaultSpawnContext)
	}
	return nil
}

// validateThreadBindings checks session.threadBindings and every channel's.
func (c *Config) validateThreadBindings() error {
	if err := c.Session.ThreadBindings.validate("session.threadBindings"); err != nil {
		return err
	}
	for name, ch := range c.Channels {
		if ch.ThreadBindings != nil {
			if err := ch.ThreadBindings.validate("channels." + name + ".threadBindings"); err != nil {
				return err
			}
		}
	}
	return nil
}

func firstBool(def bool, vs ...*bool) bool {
	for _, v := range vs {
		if v != nil {
			return *v
		}
	}
	return def
}

func firstFloat(def float64, vs ...*float64) float64 {
	for _, v := range vs {
		if v != nil {
			return *v
		}
	}
	return def
}

// hours is h hours, capped where a duration overflows.
func hours(h float64) time.Duration {
	if h <= 0 {
		return 0
	}
	if h > float64(math.MaxInt64)/float64(time.Hour) {
		return math.MaxInt64
	}
	return time.Duration(h * float64(time.Hour))
}
