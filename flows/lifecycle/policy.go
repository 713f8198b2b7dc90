package lifecycle

import (
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// DefaultIdleMinutes is the idle window of mode idle without idleMinutes
// (OpenClaw's).
const DefaultIdleMinutes = 60

// ResetPolicy is the reset policy that applies to one session, resolved as
// OpenClaw resolves it: resetByChannel[channel] replaces session.reset and
// resetByType; otherwise resetByType[type] field by field over
// session.reset, over the defaults (daily at 4).
type ResetPolicy struct {
	Mode        string // daily | idle
	AtHour      int
	IdleMinutes int // 0: no idle window
}

// Chat types a reset policy is chosen by (resetByType's keys).
const (
	TypeDirect = "direct"
	TypeGroup  = "group"
	TypeThread = "thread"
)

// ResetType is the chat type of a message to key: thread when the message
// names a thread or the key is a thread's (":thread:", ":topic:"), group
// for a group, channel or room key, else direct; OpenClaw's rule.
func ResetType(key, threadID, chatType string) string {
	k := strings.ToLower(key)
	switch {
	case threadID != "" || strings.Contains(k, ":thread:") || strings.Contains(k, ":topic:"):
		return TypeThread
	case chatType == "group" || chatType == "channel" || chatType == "room" ||
		strings.Contains(k, ":group:") || strings.Contains(k, ":channel:"):
		return TypeGroup
	}
	return TypeDirect
}

// PolicyFor resolves the policy of a session of chat type typ on channel.
func PolicyFor(s *config.Session, typ, channel string) ResetPolicy {
	base, over := s.Reset, config.SessionReset{}
	if ch, ok := s.ResetByChannel[strings.ToLower(strings.TrimSpace(channel))]; ok && channel != "" {
		base = ch
	} else if t, ok := s.ResetByType[typ]; ok {
		over = t
	} else if t, ok := s.ResetByType["dm"]; ok && typ == TypeDirect {
		over = t
	}
	p := ResetPolicy{Mode: first(over.Mode, base.Mode, config.ResetDaily), AtHour: config.DefaultResetAtHour}
	if a := firstInt(over.AtHour, base.AtHour); a != nil {
		p.AtHour = *a
	}
	if m := firstInt(over.IdleMinutes, base.IdleMinutes); m != nil {
		p.IdleMinutes = *m
	} else if p.Mode == config.ResetIdle {
		p.IdleMinutes = DefaultIdleMinutes
	}
	return p
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstInt(vs ...*int) *int {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// DailyBoundary is the most recent atHour:00 at or before now, in now's
// location (the host's local time in production).
func DailyBoundary(now time.Time, atHour int) time.Time {
	b := time.Date(now.Year(), now.Month(), now.Day(), atHour, 0, 0, 0, now.Location())
	if now.Before(b) {
		b = time.Date(now.Year(), now.Month(), now.Day()-1, atHour, 0, 0, 0, now.Location())
	}
	return b
}

// Staleness says why e must start over before a human message at now, or
// "" when it is fresh. Daily freshness counts from when the current
// sessionId started, idle freshness from the last human message (its
// start when none came yet); whichever expires first wins. An entry that
// records no start at all (written before these fields existed) is fresh:
// its first message starts the clock.
func (p ResetPolicy) Staleness(e *sessions.Entry, now time.Time) string {
	r := e.Rares()
	started := r.SessionStartedAt
	if started == 0 {
		started = e.CreatedAt
	}
	if started == 0 {
		return ""
	}
	if p.Mode == config.ResetDaily && started < DailyBoundary(now, p.AtHour).UnixMilli() {
		return "daily"
	}
	last := max(r.LastInteractionAt, started)
	if p.IdleMinutes > 0 && now.UnixMilli() > last+int64(p.IdleMinutes)*time.Minute.Milliseconds() {
		return "idle"
	}
	return ""
}

// Touch records a human message at now on e: the idle clock, and the start
// of an incarnation that records none. It reports whether e changed.
func Touch(e *sessions.Entry, now time.Time) bool {
	ms := now.UnixMilli()
	r := e.Rares()
	if r.LastInteractionAt >= ms && r.SessionStartedAt != 0 {
		return false
	}
	e.SetRare(func(r *sessions.RareFields) {
		r.LastInteractionAt = max(r.LastInteractionAt, ms)
		if r.SessionStartedAt == 0 {
			r.SessionStartedAt = first64(e.CreatedAt, ms)
		}
	})
	return true
}

func first64(vs ...int64) int64 {
	for _, v := range vs {
		if v != 0 {
			return v
		}
	}
	return 0
}
