package handlers

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
)

// The formatters of the subagents tool's text: OpenClaw's status strings,
// model refs, truncated lines, compact durations and token counts.

// runStatus is OpenClaw's status string.
func runStatus(ch *child, pending int) string {
	if pending > 0 {
		noun := "children"
		if pending == 1 {
			noun = "child"
		}
		return fmt.Sprintf("active (waiting on %d %s)", pending, noun)
	}
	if !ch.ended() {
		return "running"
	}
	switch ch.outcome {
	case "", subagents.OutcomeOK:
		return "done"
	case subagents.OutcomeError:
		return "failed"
	}
	return ch.outcome
}

// modelRef is OpenClaw's resolveModelRef over a session entry: model (with
// its provider when it has no slash), else the spawn-time overrides.
func modelRef(e *sessions.Entry) string {
	if e == nil {
		return ""
	}
	ref := func(model, provider string) string {
		model, provider = strings.TrimSpace(model), strings.TrimSpace(provider)
		switch {
		case strings.Contains(model, "/"):
			return model
		case model != "" && provider != "":
			return provider + "/" + model
		}
		return rules.FirstNonEmpty(model, provider)
	}
	return rules.FirstNonEmpty(ref(e.Model, e.ModelProvider), ref(e.Rares().ModelOverride, e.Rares().ProviderOverride))
}

// truncateLine cuts at max characters (runes), trims trailing space and
// appends "...", as OpenClaw's truncateLine does (it counts UTF-16 units).
func truncateLine(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:limit]), " \t\r\n") + "..."
}

// formatDurationCompact is OpenClaw's compact compound duration
// ("n/a" for none): milliseconds under a second, else whole seconds with
// trailing zero units left out: 10ms, 45s, 1m2s, 1h30m, 2d3h.
func formatDurationCompact(ms int64) string {
	if ms <= 0 {
		return "n/a"
	}
	if ms < 1000 {
		return fmt.Sprintf("%dms", ms)
	}
	secs := int64(math.Round(float64(ms) / 1000))
	hours, minutes, seconds := secs/3600, secs%3600/60, secs%60
	pair := func(a int64, unitA string, b int64, unitB string) string {
		if b > 0 {
			return fmt.Sprintf("%d%s%d%s", a, unitA, b, unitB)
		}
		return fmt.Sprintf("%d%s", a, unitA)
	}
	switch {
	case hours >= 24:
		return pair(hours/24, "d", hours%24, "h")
	case hours > 0:
		return pair(hours, "h", minutes, "m")
	case minutes > 0:
		return pair(minutes, "m", seconds, "s")
	}
	return fmt.Sprintf("%ds", seconds)
}

var trailingZero = regexp.MustCompile(`\.0$`)

// formatTokenShort is OpenClaw's compact token count ("" for none).
func formatTokenShort(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n < 1_000:
		return strconv.FormatInt(n, 10)
	case n < 10_000:
		return trailingZero.ReplaceAllString(strconv.FormatFloat(float64(n)/1_000, 'f', 1, 64), "") + "k"
	case n < 1_000_000:
		return strconv.FormatInt(int64(math.Round(float64(n)/1_000)), 10) + "k"
	}
	return trailingZero.ReplaceAllString(strconv.FormatFloat(float64(n)/1_000_000, 'f', 1, 64), "") + "m"
}

// tokenUsage is OpenClaw's formatTokenUsageDisplay.
func tokenUsage(in, out, total int64) string {
	var parts []string
	io := in + out
	switch {
	case io > 0:
		parts = append(parts, fmt.Sprintf("tokens %s (in %s / out %s)", formatTokenShort(io),
			rules.FirstNonEmpty(formatTokenShort(in), "0"), rules.FirstNonEmpty(formatTokenShort(out), "0")))
	case total > 0:
		parts = append(parts, fmt.Sprintf("tokens %s prompt/cache", formatTokenShort(total)))
	}
	if io > 0 && total > io {
		parts = append(parts, "prompt/cache "+formatTokenShort(total))
	}
	return strings.Join(parts, ", ")
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
