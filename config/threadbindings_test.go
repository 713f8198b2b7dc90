package config

import (
	"strings"
	"testing"
	"time"
)

// TestThreadBindingKeys: OpenClaw's threadBindings blocks load as they are
// (json5, as in openclaw.json); a channel's keys win over the session's,
// its spawnSubagentSessions over its spawnSessions, and what neither sets
// has OpenClaw's default.
func TestThreadBindingKeys(t *testing.T) {
	d := Default().ThreadBindingsFor("discord")
	if !d.Enabled || !d.SpawnEnabled || d.DefaultSpawnContext != "fork" || d.IdleTimeout != 24*time.Hour || d.MaxAge != 0 {
		t.Fatalf("defaults: %+v", d)
	}
	p := write(t, "openclaw.json", `{
  session: {threadBindings: {enabled: true, idleHours: 2, maxAgeHours: 0.5, spawnSessions: false, defaultSpawnContext: "isolated"}},
  channels: {
    Discord: {token: "x", threadBindings: {idleHours: 0, spawnSubagentSessions: true, spawnSessions: false, defaultSpawnContext: "fork"}},
    slack: {threadBindings: {enabled: false}},
  },
}`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ch, want := range map[string]ThreadBindingPolicy{
		"discord":  {Enabled: true, SpawnEnabled: true, DefaultSpawnContext: "fork", IdleTimeout: 0, MaxAge: 30 * time.Minute},
		"slack":    {Enabled: false, SpawnEnabled: false, DefaultSpawnContext: "isolated", IdleTimeout: 2 * time.Hour, MaxAge: 30 * time.Minute},
		"telegram": {Enabled: true, SpawnEnabled: false, DefaultSpawnContext: "isolated", IdleTimeout: 2 * time.Hour, MaxAge: 30 * time.Minute},
	} {
		if got := c.ThreadBindingsFor(ch); got != want {
			t.Errorf("%s: %+v, want %+v", ch, got, want)
		}
	}
}

// TestThreadBindingBadValues: a negative duration or an unknown spawn
// context refuses to load, naming the key.
func TestThreadBindingBadValues(t *testing.T) {
	for body, want := range map[string]string{
		`{session: {threadBindings: {idleHours: -1}}}`:                           "session.threadBindings.idleHours -1 must be a number of hours",
		`{session: {threadBindings: {defaultSpawnContext: "copy"}}}`:             `session.threadBindings.defaultSpawnContext "copy" must be "fork" or "isolated"`,
		`{channels: {discord: {threadBindings: {maxAgeHours: -0.5}}}}`:           "channels.discord.threadBindings.maxAgeHours -0.5 must be",
		`{channels: {discord: {threadBindings: {defaultSpawnContext: "none"}}}}`: `channels.discord.threadBindings.defaultSpawnContext "none"`,
	} {
		_, err := Load(write(t, "openclaw.json", body), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
