package runtime

import "strings"

// ReasoningEffort is what a session's thinking level (OpenClaw's /think
// levels: off, minimal, low, medium, high, xhigh) asks of an
// OpenAI-compatible endpoint as chat completions' reasoning_effort, the way
// OpenClaw maps it: a level passes as it is, and off, or no level at all,
// sends nothing, so the model keeps its own default (sending "none" would
// be refused by the many models that do not take it). Spellings OpenClaw
// accepts for a level (x-high, extra high, highest) map to it, and a level
// OpenClaw keeps only for other providers falls back as OpenClaw falls it
// back: adaptive to medium, max to xhigh. Anything else sends nothing: the
// tools refuse an unknown level before it is stored, so only an imported
// session can carry one, and its turn should still run.
func ReasoningEffort(level string) string {
	l := strings.Join(strings.FieldsFunc(strings.ToLower(level), func(r rune) bool {
		return r == ' ' || r == '-' || r == '_' || r == '\t'
	}), "")
	switch l {
	case "minimal", "low", "medium", "high", "xhigh":
		return l
	case "extrahigh":
		return "xhigh"
	case "highest":
		return "high"
	case "adaptive":
		return "medium"
	case "max":
		return "xhigh"
	}
	return ""
}
