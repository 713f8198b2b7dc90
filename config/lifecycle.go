package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Reset modes and chat types of session.reset and resetByType.
const (
	ResetDaily = "daily"
	ResetIdle  = "idle"
)

// ResetTypes are the keys resetByType takes: dm is OpenClaw's legacy alias
// of direct.
var ResetTypes = []string{"direct", "dm", "group", "thread"}

// Maintenance modes.
const (
	MaintenanceEnforce = "enforce"
	MaintenanceWarn    = "warn"
)

// validateLifecycle refuses a malformed reset or maintenance value: each
// of them decides what is archived and removed, so none falls back on a
// default the user did not choose.
func (s *Session) validateLifecycle() error {
	if err := s.Reset.validate("session.reset"); err != nil {
		return err
	}
	for k, r := range s.ResetByType {
		known := false
		for _, t := range ResetTypes {
			known = known || k == t
		}
		if !known {
			return fmt.Errorf("session.resetByType.%s: unknown chat type; use direct (or its alias dm), group or thread", k)
		}
		if err := r.validate("session.resetByType." + k); err != nil {
			return err
		}
	}
	for k, r := range s.ResetByChannel {
		if err := r.validate("session.resetByChannel." + k); err != nil {
			return err
		}
	}
	for i, t := range s.ResetTriggers {
		if t = strings.TrimSpace(t); t == "" || strings.ContainsFunc(t, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }) {
			return fmt.Errorf("session.resetTriggers[%d] %q must be one word, such as /new", i, s.ResetTriggers[i])
		}
	}
	return s.Maintenance.validate()
}

func (r SessionReset) validate(key string) error {
	switch r.Mode {
	case "", ResetDaily, ResetIdle:
	default:
		return fmt.Errorf("%s.mode %q must be \"daily\" or \"idle\"", key, r.Mode)
	}
	if r.AtHour != nil && (*r.AtHour < 0 || *r.AtHour > 23) {
		return fmt.Errorf("%s.atHour %d must be an hour from 0 to 23 (the gateway host's local time)", key, *r.AtHour)
	}
	if r.IdleMinutes != nil && *r.IdleMinutes < 0 {
		return fmt.Errorf("%s.idleMinutes %d must be a number of minutes, 1 or more (0: no idle reset)", key, *r.IdleMinutes)
	}
	return nil
}

func (m Maintenance) validate() error {
	switch m.Mode {
	case MaintenanceEnforce, MaintenanceWarn:
	default:
		return fmt.Errorf("session.maintenance.mode %q must be \"enforce\" or \"warn\"", m.Mode)
	}
	if d, err := ParseAge(m.PruneAfter); err != nil || d <= 0 {
		return fmt.Errorf("session.maintenance.pruneAfter %q must be a duration such as 30d, 12h or 90m (a bare number is days)", m.PruneAfter)
	}
	if m.MaxEntries < 1 {
		return fmt.Errorf("session.maintenance.maxEntries %d must be 1 or more", m.MaxEntries)
	}
	if _, err := m.ArchiveRetention(); err != nil {
		return fmt.Errorf("session.maintenance.resetArchiveRetention %q must be false (keep archives) or a duration such as 30d", m.ResetArchiveRetention)
	}
	if m.HighWaterBytes != "" {
		if _, err := ParseBytes(m.HighWaterBytes); err != nil {
			return fmt.Errorf("session.maintenance.highWaterBytes %q must be a size such as 1600mb (unset: 80%% of maxDiskBytes)", m.HighWaterBytes)
		}
	}
	return nil
}

// PruneAge is pruneAfter as a duration (valid once Validate passed).
func (m Maintenance) PruneAge() time.Duration {
	d, _ := ParseAge(m.PruneAfter)
	return d
}

// ArchiveRetention is resetArchiveRetention as a duration; 0 keeps every
// archive (false, unset, or a zero duration: never a cutoff that deletes
// everything at once).
func (m Maintenance) ArchiveRetention() (time.Duration, error) {
	switch v := strings.ToLower(strings.TrimSpace(m.ResetArchiveRetention)); v {
	case "", "false", "0":
		return 0, nil
	default:
		d, err := ParseAge(v)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("not a duration")
		}
		return d, nil
	}
}

// HighWater is the target of an over-budget cleanup for a budget of
// limit bytes: highWaterBytes, or 80% of the limit; never above it.
func (m Maintenance) HighWater(limit int64) int64 {
	if n, err := ParseBytes(m.HighWaterBytes); err == nil && n > 0 && n <= limit {
		return n
	}
	return limit / 5 * 4
}

// ParseAge reads OpenClaw's durations: a number with a unit ms, s, m, h
// or d (a bare number is days, OpenClaw's default unit), or a Go duration
// such as 1h30m.
func ParseAge(s string) (time.Duration, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("empty duration")
	}
	unit := 24 * time.Hour
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}} {
		if strings.HasSuffix(t, u.suffix) {
			if n, err := strconv.ParseFloat(strings.TrimSuffix(t, u.suffix), 64); err == nil {
				t, unit = strconv.FormatFloat(n, 'f', -1, 64), u.d
			}
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return time.ParseDuration(t)
	}
	if n < 0 || n*float64(unit) > math.MaxInt64 {
		return 0, fmt.Errorf("duration out of range")
	}
	return time.Duration(n * float64(unit)), nil
}
