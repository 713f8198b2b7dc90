// Package cronspec is a cron job's schedule as OpenClaw states it (kind
// at, every or cron, with an IANA time zone) and as JetStream's message
// scheduler takes it (the Nats-Schedule header): validation with
// OpenClaw's texts, the header values, and the next fire time. Pure: no
// clock but the one passed in.
package cronspec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule kinds.
const (
	KindAt    = "at"
	KindEvery = "every"
	KindCron  = "cron"
)

// Schedule is OpenClaw's `schedule`: at (ISO 8601, UTC when it has no
// offset), everyMs (milliseconds) or expr (5 fields, or 6 with seconds)
// with an optional tz.
type Schedule struct {
	Kind    string `json:"kind"`
	At      string `json:"at,omitempty"`
	EveryMs int64  `json:"everyMs,omitempty"`
	Expr    string `json:"expr,omitempty"`
	Tz      string `json:"tz,omitempty"`
}

// MinEvery is the scheduler's own floor: nats-server refuses an @every
// under one second, and fires at most once a second.
const MinEvery = time.Second

// Validate checks s as the scheduler would take it, with minEvery the
// configured floor (cron.minInterval; below MinEvery counts as MinEvery).
// now places an at time: one in the past is refused, it would never fire.
func (s Schedule) Validate(minEvery time.Duration, now time.Time) error {
	minEvery = max(minEvery, MinEvery)
	switch s.Kind {
	case KindAt:
		if s.Tz != "" {
			if _, err := loadTz(s.Tz); err != nil {
				return err
			}
		}
		t, err := s.AtTime()
		if err != nil {
			return err
		}
		if !t.After(now) {
			return fmt.Errorf("cron at schedule %s is in the past: it would never fire; give a future time", t.Format(time.RFC3339))
		}
		return nil
	case KindEvery:
		if s.Tz != "" {
			return errors.New("cron every schedules take no tz: an interval is the same in every time zone")
		}
		d := time.Duration(s.EveryMs) * time.Millisecond
		if d < minEvery {
			return fmt.Errorf("cron every schedule of %s is below the minimum interval of %s; choose a longer --every", d, minEvery)
		}
		if d%time.Second != 0 {
			return fmt.Errorf("cron every schedule of %s is not whole seconds: the scheduler fires on seconds; round it", d)
		}
		return nil
	case KindCron:
		loc, err := loadTz(s.Tz)
		if err != nil {
			return err
		}
		f, err := parseExpr(s.Expr)
		if err != nil {
			return fmt.Errorf("invalid cron expression %q: %v; use 5 fields (minute hour day month weekday) or 6 with seconds first, e.g. \"0 7 * * *\"", s.Expr, err)
		}
		if gap := f.minGap(now.In(loc)); gap > 0 && gap < minEvery {
			return fmt.Errorf("cron expression %q fires every %s, below the minimum interval of %s", s.Expr, gap, minEvery)
		}
		if f.next(now.In(loc)).IsZero() {
			return fmt.Errorf("cron expression %q has no upcoming run time and would never fire", s.Expr)
		}
		return nil
	case "":
		return errors.New("cron job needs a schedule: --at, --every or --cron")
	}
	return fmt.Errorf("unknown schedule kind %q: use at, every or cron", s.Kind)
}

func loadTz(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.EqualFold(tz, "local") {
		return nil, fmt.Errorf("invalid timezone %q: use an IANA name such as America/Los_Angeles or UTC", tz)
	}
	return loc, nil
}

// AtTime is the at schedule's instant: RFC 3339 with or without an
// offset; without one it is the wall clock in Tz, UTC when Tz is empty
// (OpenClaw's rule for --at).
func (s Schedule) AtTime() (time.Time, error) {
	v := strings.TrimSpace(s.At)
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	loc, err := loadTz(s.Tz)
	if err != nil {
		return time.Time{}, err
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid ISO timestamp %q for --at: use 2026-02-01T16:00:00Z (or a duration such as 20m)", s.At)
}

// Pattern is the schedule as the Nats-Schedule header and the
// Nats-Schedule-Time-Zone header (empty: none) take it. A 5-field
// expression gains a seconds field of 0; an at time is sent whole
// seconds in UTC (the server takes no zone with @at).
func (s Schedule) Pattern() (pattern, tz string) {
	switch s.Kind {
	case KindAt:
		t, _ := s.AtTime()
		return "@at " + t.Truncate(time.Second).Format(time.RFC3339), ""
	case KindEvery:
		return "@every " + (time.Duration(s.EveryMs) * time.Millisecond).String(), ""
	}
	f := strings.Fields(s.Expr)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	return strings.Join(f, " "), s.Tz
}

// Next is when s fires after now; zero when never (a past at time, or a
// schedule that does not parse).
func (s Schedule) Next(now time.Time) time.Time {
	switch s.Kind {
	case KindAt:
		t, err := s.AtTime()
		if err != nil || !t.After(now) {
			return time.Time{}
		}
		return t
	case KindEvery:
		d := time.Duration(s.EveryMs) * time.Millisecond
		if d <= 0 {
			return time.Time{}
		}
		return now.Truncate(time.Second).Add(d)
	case KindCron:
		loc, err := loadTz(s.Tz)
		if err != nil {
			return time.Time{}
		}
		f, err := parseExpr(s.Expr)
		if err != nil {
			return time.Time{}
		}
		return f.next(now.In(loc)).UTC()
	}
	return time.Time{}
}

// ParseEvery reads a CLI duration such as 30s, 15m or 1h (OpenClaw's
// --every) into milliseconds.
func ParseEvery(v string) (int64, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("invalid duration %q for --every: use a duration such as 30s, 15m or 1h", v)
	}
	return d.Milliseconds(), nil
}

// fields is a parsed expression: one bit per allowed value.
type fields struct {
	sec, min, hour, dom, month, dow uint64
	domStar, dowStar                bool
}

var (
	monthNames = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
	dowNames   = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
)

func parseExpr(expr string) (*fields, error) {
	fs := strings.Fields(expr)
	switch len(fs) {
	case 5:
		fs = append([]string{"0"}, fs...)
	case 6:
	default:
		return nil, fmt.Errorf("it has %d fields", len(fs))
	}
	var f fields
	var err error
	spec := []struct {
		dst      *uint64
		lo, hi   int
		names    map[string]int
		star     *bool
		fieldFor string
	}{
		{&f.sec, 0, 59, nil, nil, "second"}, {&f.min, 0, 59, nil, nil, "minute"}, {&f.hour, 0, 23, nil, nil, "hour"},
		{&f.dom, 1, 31, nil, &f.domStar, "day of month"}, {&f.month, 1, 12, monthNames, nil, "month"},
		{&f.dow, 0, 6, dowNames, &f.dowStar, "day of week"},
	}
	for i, sp := range spec {
		if *sp.dst, err = parseField(fs[i], sp.lo, sp.hi, sp.names); err != nil {
			return nil, fmt.Errorf("%s field %q: %v", sp.fieldFor, fs[i], err)
		}
		if sp.star != nil {
			*sp.star = fs[i] == "*" || fs[i] == "?"
		}
	}
	return &f, nil
}

func parseField(v string, lo, hi int, names map[string]int) (uint64, error) {
	var bits uint64
	for part := range strings.SplitSeq(v, ",") {
		rng, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepS)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("step %q is not a positive number", stepS)
			}
			step = n
		}
		a, b := lo, hi
		if rng != "*" && rng != "?" {
			x, y, isRange := strings.Cut(rng, "-")
			var err error
			if a, err = value(x, names); err != nil {
				return 0, err
			}
			b = a
			if isRange {
				if b, err = value(y, names); err != nil {
					return 0, err
				}
			} else if hasStep {
				b = hi
			}
		}
		if a < lo || b > hi || a > b {
			return 0, fmt.Errorf("%q is outside %d-%d", part, lo, hi)
		}
		for i := a; i <= b; i += step {
			bits |= 1 << uint(i)
		}
	}
	return bits, nil
}

func value(v string, names map[string]int) (int, error) {
	if n, ok := names[strings.ToLower(v)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", v)
	}
	return n, nil
}

func has(bits uint64, v int) bool { return bits&(1<<uint(v)) != 0 }

// dayMatches is cron's rule: with both day fields restricted, either may
// match; with one a star, the other decides.
func (f *fields) dayMatches(t time.Time) bool {
	d, w := has(f.dom, t.Day()), has(f.dow, int(t.Weekday()))
	if f.domStar || f.dowStar {
		return d && w
	}
	return d || w
}

// next is the first second after t the expression allows, searched up
// to five years ahead (zero: none).
func (f *fields) next(t time.Time) time.Time {
	t = t.Truncate(time.Second).Add(time.Second)
	limit := t.AddDate(5, 0, 0)
	for t.Before(limit) {
		switch {
		case !has(f.month, int(t.Month())):
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, t.Location())
		case !f.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, t.Location())
		case !has(f.hour, t.Hour()):
			t = t.Truncate(time.Hour).Add(time.Hour)
		case !has(f.min, t.Minute()):
			t = t.Truncate(time.Minute).Add(time.Minute)
		case !has(f.sec, t.Second()):
			t = t.Add(time.Second)
		default:
			return t
		}
	}
	return time.Time{}
}

// minGap is the shortest time between two fires within the next day of
// fires after t (0: fewer than two), enough for the minimum-interval
// check: the tightest gap of an expression shows within a day unless it
// only fires on some days, whose gaps are a day or more.
func (f *fields) minGap(t time.Time) time.Duration {
	var gap time.Duration
	prev := f.next(t)
	end := prev.Add(24 * time.Hour)
	for i := 0; i < 2000 && !prev.IsZero() && prev.Before(end); i++ {
		n := f.next(prev)
		if n.IsZero() {
			break
		}
		if g := n.Sub(prev); gap == 0 || g < gap {
			gap = g
		}
		prev = n
	}
	return gap
}
