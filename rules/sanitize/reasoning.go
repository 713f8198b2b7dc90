package sanitize

import "strings"

// Reasoning tags: <think>, <thinking>, <thought>, <antthinking> and their
// antml:-prefixed forms hide model reasoning; <final> wraps the answer.
// Outside code, <final> tags are deleted (their content stays) and thinking
// blocks are removed with their content. An unclosed thinking block drops the
// rest of the text in strict mode and keeps it in preserve mode. The stage
// only runs (and only trims) when the text passes the reference's quick check
// /<\s*\/?\s*(?:(?:antml:)?(?:think(?:ing)?|thought)|antthinking|final)\b/i.

type reasoningMode int

const (
	reasoningStrict reasoningMode = iota
	reasoningPreserve
)

type trimMode int

const (
	trimNone trimMode = iota
	trimStart
	trimBoth
)

func applyTrim(s string, t trimMode) string {
	switch t {
	case trimStart:
		return trimStartJS(s)
	case trimBoth:
		return trimJS(s)
	}
	return s
}

// thinkingName matches (?:(?:antml:)?(?:think(?:ing)?|thought)|antthinking)\b
// at s[i:], returning the end of the name or -1.
func thinkingName(s string, i int) int {
	if hasPrefixFold(s, i, "antml:") {
		j := i + len("antml:")
		e := wordRunEnd(s, j)
		switch strings.ToLower(s[j:e]) {
		case "think", "thinking", "thought":
			return e
		}
	}
	e := wordRunEnd(s, i)
	switch strings.ToLower(s[i:e]) {
	case "think", "thinking", "thought", "antthinking":
		return e
	}
	return -1
}

func finalName(s string, i int) int {
	e := wordRunEnd(s, i)
	if equalFoldASCII(s[i:e], "final") {
		return e
	}
	return -1
}

func reasoningQuick(s string) bool {
	for i := 0; ; {
		lt := indexByteFrom(s, i, '<')
		if lt < 0 {
			return false
		}
		j := skipJSSpace(s, lt+1)
		if j < len(s) && s[j] == '/' {
			j = skipJSSpace(s, j+1)
		}
		if thinkingName(s, j) >= 0 || finalName(s, j) >= 0 {
			return true
		}
		i = lt + 1
	}
}

func stripReasoningTags(s string, mode reasoningMode, trim trimMode) string {
	if s == "" || !reasoningQuick(s) {
		return s
	}
	cleaned := removeFinalTags(s)
	cleaned = stripBlocks(cleaned, thinkingName, findCodeRegions(cleaned), mode == reasoningPreserve)
	return applyTrim(cleaned, trim)
}

// removeFinalTags deletes /<\s*\/?\s*final\b[^<>]*>/gi matches that do not
// start inside code.
func removeFinalTags(s string) string {
	var b strings.Builder
	var regions *codeRegions
	last := 0
	for i := 0; ; {
		lt := indexByteFrom(s, i, '<')
		if lt < 0 {
			break
		}
		end, _, ok := parseSimpleTag(s, lt, finalName)
		if !ok {
			i = lt + 1
			continue
		}
		if regions == nil {
			r := findCodeRegions(s)
			regions = &r
			b.Grow(len(s))
		}
		if !regions.contains(lt) {
			b.WriteString(s[last:lt])
			last = end
		}
		i = end
	}
	if regions == nil {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
