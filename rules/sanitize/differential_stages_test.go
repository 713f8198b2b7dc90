package sanitize

import (
	"strings"
	"testing"
)

// naiveStripToolCallXML is the reference loop verbatim: it reparses tags at
// every '<', rescans quotes from the block start for each candidate close and
// re-runs the payload matchers, i.e. the quadratic original.
func naiveStripToolCallXML(s string) string {
	regions := findCodeRegions(s)
	var b strings.Builder
	last := 0
	inBlock, blockName, blockJSON, contentStart := false, int8(-1), false, 0
	balance := map[int8]int{}
	insideQuote := func(start, end int) bool {
		var q quoteScanner
		q.cursor = start
		return q.insideAt(s, end)
	}
	for idx := 0; idx < len(s); idx++ {
		if s[idx] != '<' {
			continue
		}
		if !inBlock && regions.contains(idx) {
			continue
		}
		tag, ok := parseToolTagHead(s, idx)
		if !ok {
			continue
		}
		tag.close = naiveTagClose(s, tag.contentStart)
		end := tag.end(len(s))
		if !inBlock {
			b.WriteString(s[last:idx])
			if tag.isClose {
				if tag.truncated() {
					b.WriteString(s[idx:tag.contentStart])
					last = tag.contentStart
					idx = max(idx, tag.contentStart-1)
					continue
				}
				if balance[tag.name] > 0 {
					b.WriteString(s[idx:end])
					balance[tag.name]--
				}
				last = end
				idx = max(idx, end-1)
				continue
			}
			if tag.selfClosing(s) {
				last = end
				idx = max(idx, end-1)
				continue
			}
			ps := end
			if tag.truncated() {
				ps = tag.contentStart
			}
			isJSON := jsonPayloadStart(s, ps)
			isXML := !isJSON && tag.name == nameToolCall && xmlPayloadStart(s, ps)
			if isJSON || isXML {
				inBlock, blockName, blockJSON, contentStart = true, tag.name, isJSON, end
				if tag.truncated() {
					last = len(s)
					break
				}
			} else {
				pe := end
				if tag.truncated() {
					pe = tag.contentStart
				} else {
					balance[tag.name]++
				}
				b.WriteString(s[idx:pe])
				last = pe
				idx = max(idx, pe-1)
				continue
			}
		} else if tag.isClose && (tag.name == blockName || (blockName == nameToolResult && tag.name == nameToolCall)) &&
			(!blockJSON || !insideQuote(contentStart, idx)) {
			inBlock = false
		}
		last = end
		idx = max(idx, end-1)
	}
	if !inBlock {
		b.WriteString(s[last:])
	}
	return b.String()
}

// naiveStripDowngradedCalls is stripToolCalls with consumeJsonish, verbatim.
func naiveStripDowngradedCalls(s string) string {
	consume := func(i int) int {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
		if i >= len(s) {
			return -1
		}
		switch s[i] {
		case '{', '[':
			return naiveBracketEnd(s, i)
		case '"':
			for j, esc := i+1, false; j < len(s); j++ {
				if esc {
					esc = false
				} else if s[j] == '\\' {
					esc = true
				} else if s[j] == '"' {
					return j + 1
				}
			}
			return -1
		}
		e := i
		for e < len(s) && s[e] != '\n' && s[e] != '\r' {
			e++
		}
		return e
	}
	var b strings.Builder
	cursor := 0
	for _, m := range bracketMarkers(s, "[tool call:") {
		if m[0] < cursor {
			continue
		}
		b.WriteString(s[cursor:m[0]])
		i := skipSpaceTab(s, m[1])
		if i < len(s) && s[i] == '\r' {
			i++
			if i < len(s) && s[i] == '\n' {
				i++
			}
		} else if i < len(s) && s[i] == '\n' {
			i++
		}
		i = skipSpaceTab(s, i)
		if hasPrefixFold(s, i, "arguments") {
			i += 9
			if i < len(s) && s[i] == ':' {
				i++
			}
			if i < len(s) && s[i] == ' ' {
				i++
			}
			if e := consume(i); e >= 0 {
				i = e
			}
		}
		r := b.String()
		if i < len(s) && (s[i] == '\n' || s[i] == '\r') && (r == "" || strings.HasSuffix(r, "\n") || strings.HasSuffix(r, "\r")) {
			if s[i] == '\r' {
				i++
			}
			if i < len(s) && s[i] == '\n' {
				i++
			}
		}
		cursor = i
	}
	b.WriteString(s[cursor:])
	return b.String()
}

// naiveStripToolResults evaluates the lazy body and lookahead of
// /\[Tool Result for ID[^\]]*\]\n?[\s\S]*?(?=\n*\[Tool |\n*$)/gi directly.
func naiveStripToolResults(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; ; {
		st := indexFold(s, i, "[tool result for id")
		if st < 0 {
			break
		}
		rb := strings.IndexByte(s[st:], ']')
		if rb < 0 {
			break
		}
		x := st + rb + 1
		if x < len(s) && s[x] == '\n' {
			x++
		}
		for ; ; x++ {
			y := x
			for y < len(s) && s[y] == '\n' {
				y++
			}
			if y == len(s) || hasPrefixFold(s, y, "[tool ") {
				break
			}
		}
		b.WriteString(s[last:st])
		last, i = x, x
	}
	b.WriteString(s[last:])
	return b.String()
}

func TestDiffToolCallXMLStage(t *testing.T) {
	forRandomTexts(t, func(s string) {
		if got, want := stripToolCallXML(s), naiveStripToolCallXML(s); got != want {
			t.Fatalf("tool XML on %q:\n got %q\nwant %q", s, got, want)
		}
	})
}

func TestDiffDowngradedStage(t *testing.T) {
	forRandomTexts(t, func(s string) {
		if got, want := stripDowngradedToolCalls(s), naiveStripDowngradedCalls(s); got != want {
			t.Fatalf("tool calls on %q:\n got %q\nwant %q", s, got, want)
		}
		if got, want := stripToolResultBlocks(s), naiveStripToolResults(s); got != want {
			t.Fatalf("tool results on %q:\n got %q\nwant %q", s, got, want)
		}
	})
}
