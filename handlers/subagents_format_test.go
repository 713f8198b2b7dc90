package handlers

import (
	"strings"
	"testing"
)

// The target texts a tool call cannot reach (kill and steer throw `target
// required` first, as OpenClaw's do) and the formatting helpers.
func TestSubagentsResolverMissingTarget(t *testing.T) {
	c := &subagentsCall{pending: map[string]int{}}
	for _, tok := range []string{"", "   "} {
		if ch, msg := c.resolveTarget(tok); ch != nil || msg != "Missing subagent target." {
			t.Errorf("%q: %v %q", tok, ch, msg)
		}
	}
}

func TestSubagentsFormatting(t *testing.T) {
	for ms, want := range map[int64]string{
		0: "n/a", -5: "n/a", 1: "1ms", 10: "10ms", 999: "999ms", 1000: "1s", 1499: "1s", 1500: "2s", 45_000: "45s",
		60_000: "1m", 62_000: "1m2s", 89_999: "1m30s", 59*60_000 + 59_600: "1h", 60 * 60_000: "1h", 85 * 60_000: "1h25m",
		85*60_000 + 40_000: "1h25m", 24 * 60 * 60_000: "1d", 27 * 60 * 60_000: "1d3h", 27*60*60_000 + 59*60_000: "1d3h",
	} {
		if got := formatDurationCompact(ms); got != want {
			t.Errorf("formatDurationCompact(%d) = %q, want %q", ms, got, want)
		}
	}
	for n, want := range map[int64]string{0: "", 999: "999", 1000: "1k", 1500: "1.5k", 9_960: "10k", 10_400: "10k", 999_499: "999k", 1_000_000: "1m", 2_340_000: "2.3m"} {
		if got := formatTokenShort(n); got != want {
			t.Errorf("formatTokenShort(%d) = %q, want %q", n, got, want)
		}
	}
	if got := tokenUsage(0, 0, 5000); got != "tokens 5k prompt/cache" {
		t.Errorf("prompt/cache only: %q", got)
	}
	if got := tokenUsage(10, 0, 0); got != "tokens 10 (in 10 / out 0)" {
		t.Errorf("input only: %q", got)
	}
	if got := truncateLine("abc  def", 5); got != "abc..." {
		t.Errorf("truncateLine trims before the ellipsis: %q", got)
	}
	if got := truncateLine(strings.Repeat("é", 48), 48); got != strings.Repeat("é", 48) {
		t.Errorf("48 runes are not cut: %q", got)
	}
}
