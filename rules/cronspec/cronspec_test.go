package cronspec

import (
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 2, 28, 12, 0, 0, 0, time.UTC)

func TestValidateRefuses(t *testing.T) {
	for _, c := range []struct {
		s    Schedule
		min  time.Duration
		want string
	}{
		{Schedule{Kind: KindCron, Expr: "61 * * * *"}, 0, "invalid cron expression"},
		{Schedule{Kind: KindCron, Expr: "* * *"}, 0, "invalid cron expression"},
		{Schedule{Kind: KindCron, Expr: "0 7 * * *", Tz: "Mars/Olympus"}, 0, "invalid timezone"},
		{Schedule{Kind: KindEvery, EveryMs: 500}, 0, "below the minimum interval of 1s"},
		{Schedule{Kind: KindEvery, EveryMs: 30_000}, 5 * time.Minute, "below the minimum interval of 5m0s"},
		{Schedule{Kind: KindCron, Expr: "*/1 * * * *"}, 5 * time.Minute, "below the minimum interval"},
		{Schedule{Kind: KindCron, Expr: "0,1 * * * *"}, 5 * time.Minute, "below the minimum interval"},
		{Schedule{Kind: KindCron, Expr: "0 0 30 2 *"}, 0, "would never fire"},
		{Schedule{Kind: KindAt, At: "2026-02-01T16:00:00Z"}, 0, "in the past"},
		{Schedule{Kind: KindAt, At: "tomorrow"}, 0, "invalid ISO timestamp"},
		{Schedule{}, 0, "needs a schedule"},
	} {
		err := c.s.Validate(c.min, now)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.s, err, c.want)
		}
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, s := range []Schedule{
		{Kind: KindCron, Expr: "0 7 * * *", Tz: "America/Los_Angeles"},
		{Kind: KindCron, Expr: "0 9 * * *"},
		{Kind: KindCron, Expr: "*/5 * * * * *"},
		{Kind: KindCron, Expr: "0 6 * * MON-FRI"},
		{Kind: KindEvery, EveryMs: 1000},
		{Kind: KindAt, At: "2026-03-01T00:00:00Z"},
		{Kind: KindAt, At: "2026-03-01T09:00", Tz: "Europe/Berlin"},
	} {
		if err := s.Validate(0, now); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	if err := (Schedule{Kind: KindCron, Expr: "0 9 * * *"}).Validate(time.Hour, now); err != nil {
		t.Errorf("daily under an hourly floor: %v", err)
	}
}

func TestPatternAndNext(t *testing.T) {
	s := Schedule{Kind: KindCron, Expr: "0 7 * * *", Tz: "America/Los_Angeles"}
	if p, tz := s.Pattern(); p != "0 0 7 * * *" || tz != "America/Los_Angeles" {
		t.Fatalf("pattern %q %q", p, tz)
	}
	// 12:00 UTC is 04:00 in Los Angeles (PST): the next 07:00 there is 15:00 UTC
	if n := s.Next(now); !n.Equal(time.Date(2026, 2, 28, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("next %v", n)
	}
	if p, _ := (Schedule{Kind: KindEvery, EveryMs: 90_000}).Pattern(); p != "@every 1m30s" {
		t.Fatalf("every pattern %q", p)
	}
	at := Schedule{Kind: KindAt, At: "2026-03-01T09:00", Tz: "Europe/Berlin"}
	if p, _ := at.Pattern(); p != "@at 2026-03-01T08:00:00Z" {
		t.Fatalf("at pattern %q", p)
	}
	if n := (Schedule{Kind: KindCron, Expr: "0 6 * * MON-FRI"}).Next(now); n.Weekday() != time.Monday || n.Hour() != 6 {
		t.Fatalf("weekday next %v", n) // 2026-02-28 is a Saturday
	}
	if ms, err := ParseEvery("15m"); err != nil || ms != 900_000 {
		t.Fatalf("ParseEvery %d %v", ms, err)
	}
}
