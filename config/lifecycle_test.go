package config

import (
	"strings"
	"testing"
	"time"
)

// TestLifecycleKeys: OpenClaw's reset and maintenance blocks load as they
// are (json5, as in openclaw.json), with OpenClaw's defaults for what they
// leave out.
func TestLifecycleKeys(t *testing.T) {
	c := Default()
	m := c.Session.Maintenance
	if c.Session.Reset.Mode != "daily" || *c.Session.Reset.AtHour != 4 || c.Session.Reset.IdleMinutes != nil ||
		m.Mode != "warn" || m.PruneAge() != 30*24*time.Hour || m.MaxEntries != 5000 || m.HighWater(1000) != 800 {
		t.Fatalf("defaults: reset %+v maintenance %+v", c.Session.Reset, m)
	}
	if r, _ := m.ArchiveRetention(); r != 0 {
		t.Fatalf("resetArchiveRetention default keeps archives, got %s", r)
	}
	p := write(t, "openclaw.json", `{
  session: {
    reset: {mode: "daily", atHour: 0, idleMinutes: 120},
    resetByType: {thread: {mode: "daily", atHour: 6}, dm: {mode: "idle", idleMinutes: 240}},
    resetByChannel: {discord: {mode: "idle", idleMinutes: 10080}},
    maintenance: {mode: "warn", pruneAfter: "12h", maxEntries: 50, resetArchiveRetention: "7d", highWaterBytes: "1gb"},
  },
}`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Session
	if *s.Reset.AtHour != 0 || *s.Reset.IdleMinutes != 120 || s.ResetByType["dm"].Mode != "idle" || *s.ResetByType["thread"].AtHour != 6 ||
		*s.ResetByChannel["discord"].IdleMinutes != 10080 {
		t.Fatalf("reset: %+v", s)
	}
	if r, _ := s.Maintenance.ArchiveRetention(); s.Maintenance.Mode != "warn" || s.Maintenance.PruneAge() != 12*time.Hour || r != 7*24*time.Hour ||
		s.Maintenance.MaxEntries != 50 || s.Maintenance.HighWater(2<<30) != 1<<30 {
		t.Fatalf("maintenance: %+v", s.Maintenance)
	}
}

// TestLifecycleBadValues: each malformed reset or maintenance value
// refuses to load, naming the key and the value.
func TestLifecycleBadValues(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"session: {reset: {mode: weekly}}", `session.reset.mode "weekly" must be "daily" or "idle"`},
		{"session: {reset: {atHour: 24}}", "session.reset.atHour 24 must be an hour from 0 to 23"},
		{"session: {reset: {idleMinutes: -5}}", "session.reset.idleMinutes -5 must be"},
		{"session: {resetByType: {channel: {mode: idle}}}", "session.resetByType.channel: unknown chat type"},
		{"session: {resetByChannel: {discord: {atHour: -1}}}", "session.resetByChannel.discord.atHour -1"},
		{"session: {resetTriggers: ['/new now']}", `session.resetTriggers[0] "/new now" must be one word`},
		{"session: {maintenance: {mode: strict}}", `session.maintenance.mode "strict" must be "enforce" or "warn"`},
		{"session: {maintenance: {pruneAfter: soon}}", `session.maintenance.pruneAfter "soon" must be a duration`},
		{"session: {maintenance: {pruneAfter: 0d}}", `session.maintenance.pruneAfter "0d" must be a duration`},
		{"session: {maintenance: {maxEntries: 0}}", "session.maintenance.maxEntries 0 must be 1 or more"},
		{"session: {maintenance: {resetArchiveRetention: forever}}", `session.maintenance.resetArchiveRetention "forever" must be false`},
		{"session: {maintenance: {highWaterBytes: lots}}", `session.maintenance.highWaterBytes "lots" must be a size`},
	} {
		_, err := Load(write(t, "sessionbus.yaml", tc.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "sessionbus.yaml") {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "30": 30 * 24 * time.Hour, "12h": 12 * time.Hour,
		"90m": 90 * time.Minute, "45s": 45 * time.Second, "500ms": 500 * time.Millisecond, "1h30m": 90 * time.Minute, "1.5d": 36 * time.Hour} {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "-1d", "d"} {
		if _, err := ParseAge(in); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}
