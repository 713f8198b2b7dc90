package lifecycle

import (
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

func ip(n int) *int { return &n }

// TestPolicyFor: resetByChannel replaces reset and resetByType; resetByType
// (dm for direct) overrides reset field by field; idle without minutes is
// 60; the defaults are daily at 4.
func TestPolicyFor(t *testing.T) {
	s := &config.Session{
		Reset: config.SessionReset{Mode: "daily", AtHour: ip(5), IdleMinutes: ip(120)},
		ResetByType: map[string]config.SessionReset{
			"group":  {Mode: "idle"},
			"thread": {AtHour: ip(6)},
			"dm":     {IdleMinutes: ip(240)},
		},
		ResetByChannel: map[string]config.SessionReset{"discord": {Mode: "idle", IdleMinutes: ip(10080)}},
	}
	for name, tc := range map[string]struct {
		typ, channel string
		want         ResetPolicy
	}{
		"direct via dm":  {TypeDirect, "telegram", ResetPolicy{"daily", 5, 240}},
		"group":          {TypeGroup, "slack", ResetPolicy{"idle", 5, 120}},
		"thread":         {TypeThread, "slack", ResetPolicy{"daily", 6, 120}},
		"channel first":  {TypeGroup, "Discord", ResetPolicy{"idle", 4, 10080}},
		"no channel set": {TypeThread, "", ResetPolicy{"daily", 6, 120}},
	} {
		if got := PolicyFor(s, tc.typ, tc.channel); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
	if got := PolicyFor(&config.Default().Session, TypeDirect, "x"); got != (ResetPolicy{"daily", 4, 0}) {
		t.Errorf("defaults: %+v", got)
	}
	if got := PolicyFor(&config.Session{Reset: config.SessionReset{Mode: "idle"}}, TypeDirect, ""); got.IdleMinutes != DefaultIdleMinutes {
		t.Errorf("idle without minutes: %+v", got)
	}
}

func TestResetType(t *testing.T) {
	for _, tc := range []struct{ key, thread, chat, want string }{
		{"agent:main:main", "", "", TypeDirect},
		{"agent:main:telegram:dm:1", "", "direct", TypeDirect},
		{"agent:main:slack:group:g1", "", "", TypeGroup},
		{"agent:main:discord:channel:c1", "", "", TypeGroup},
		{"agent:main:x:room", "", "room", TypeGroup},
		{"agent:main:slack:channel:c1:thread:9", "", "", TypeThread},
		{"agent:main:telegram:group:g:topic:3", "", "", TypeThread},
		{"agent:main:main", "42", "", TypeThread},
	} {
		if got := ResetType(tc.key, tc.thread, tc.chat); got != tc.want {
			t.Errorf("%v: %s", tc, got)
		}
	}
}

// TestStaleness: daily counts from the sessionId's start, idle from the
// last human message; an entry with no start recorded is fresh.
func TestStaleness(t *testing.T) {
	zone := time.FixedZone("host", -7*3600)
	at := func(d, h, m int) time.Time { return time.Date(2026, 5, d, h, m, 0, 0, zone) }
	entry := func(started, last time.Time) *sessions.Entry {
		e := &sessions.Entry{}
		e.SetRare(func(r *sessions.RareFields) {
			r.SessionStartedAt, r.LastInteractionAt = started.UnixMilli(), last.UnixMilli()
		})
		return e
	}
	daily := ResetPolicy{Mode: "daily", AtHour: 4}
	both := ResetPolicy{Mode: "daily", AtHour: 4, IdleMinutes: 30}
	for name, tc := range map[string]struct {
		p    ResetPolicy
		e    *sessions.Entry
		now  time.Time
		want string
	}{
		"same day":              {daily, entry(at(1, 5, 0), at(1, 23, 0)), at(2, 3, 59), ""},
		"past 4:00":             {daily, entry(at(1, 5, 0), at(2, 3, 59)), at(2, 4, 0), "daily"},
		"activity keeps no day": {daily, entry(at(1, 5, 0), at(2, 3, 59)), at(2, 9, 0), "daily"},
		"started after 4:00":    {daily, entry(at(2, 4, 0), at(2, 4, 0)), at(2, 23, 0), ""},
		"idle first":            {both, entry(at(2, 5, 0), at(2, 6, 0)), at(2, 6, 31), "idle"},
		"idle not yet":          {both, entry(at(2, 5, 0), at(2, 6, 0)), at(2, 6, 30), ""},
		"idle from start":       {both, entry(at(2, 5, 0), time.UnixMilli(0)), at(2, 5, 31), "idle"},
		"no start recorded":     {both, &sessions.Entry{}, at(9, 9, 0), ""},
		"created counts":        {daily, &sessions.Entry{CreatedAt: at(1, 5, 0).UnixMilli()}, at(2, 5, 0), "daily"},
	} {
		if got := tc.p.Staleness(tc.e, tc.now); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
