package sanitize

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// The hand-written linear scanners are checked against direct ports of the
// reference: its regular expressions (compiled with the JavaScript-semantics
// translator where RE2 can express them) and its naive rescanning loops.

var diffFragments = []string{
	"<", ">", "/", " ", "\n", "\r", "\t", "\u00a0", "\"", "'", "\\", "`", "```", "~~~", "{", "}", "[", "]",
	"=", ":", "-", "_", "a", "Z", "9", "é", "😀", "|", "｜", "<|", "|>",
	"tool_call", "tool_result", "function_call", "function_calls", "tool_calls", "TOOL_CALL",
	"function", "invoke", "parameter", "arguments", "think", "thinking", "thought", "antthinking",
	"antml:", "final", "relevant-memories", "relevant_memories", "minimax:tool_call",
	"[Tool Call:", "[Tool Result for ID", "[Tool ", "[Historical context:", "Arguments:", "arguments",
	"name=", "x=1", " a=\"b\"", "{\"a\":1}",
}

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(diffFragments[rng.Intn(len(diffFragments))])
	}
	return b.String()
}

func forRandomTexts(t *testing.T, f func(s string)) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		f(randomText(rng, 1+rng.Intn(40)))
	}
}

func naiveTagClose(s string, start int) int {
	var quote byte
	escaped := false
	for i := start; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == quote {
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'':
			quote = c
		case '<':
			return -1
		case '>':
			return i
		}
	}
	return -1
}

func naiveBracketEnd(s string, start int) int {
	depth, inString, escaped := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		if inString {
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

func TestDiffTagCloses(t *testing.T) {
	forRandomTexts(t, func(s string) {
		for _, tag := range findToolTags(s) {
			if want := naiveTagClose(s, tag.contentStart); tag.close != want {
				t.Fatalf("%q tag at %d: close %d, want %d", s, tag.lt, tag.close, want)
			}
		}
	})
}

func TestDiffBracketEnds(t *testing.T) {
	forRandomTexts(t, func(s string) {
		var starts []int
		for i := 0; i < len(s); i++ {
			if s[i] == '{' || s[i] == '[' {
				starts = append(starts, i)
			}
		}
		got := balancedJSONEnds(s, starts)
		for k, st := range starts {
			if want := naiveBracketEnd(s, st); got[k] != want {
				t.Fatalf("%q start %d: end %d, want %d", s, st, got[k], want)
			}
		}
		var c stringEnds
		for i := 0; i < len(s); i++ {
			if s[i] != '"' {
				continue
			}
			want := -1
			for j, esc := i+1, false; j < len(s); j++ {
				if esc {
					esc = false
				} else if s[j] == '\\' {
					esc = true
				} else if s[j] == '"' {
					want = j + 1
					break
				}
			}
			if got := c.end(s, i); got != want {
				t.Fatalf("%q string at %d: end %d, want %d", s, i, got, want)
			}
		}
	})
}

func mustJS(t *testing.T, src, flags string) *regexp.Regexp {
	t.Helper()
	re, err := compileJSRegex(src, flags)
	if err != nil {
		t.Fatal(err)
	}
	return re.re
}

func TestDiffPayloadStarts(t *testing.T) {
	jsonRE := mustJS(t, "^(?:\\s+[A-Za-z_:][-A-Za-z0-9_:.]*\\s*=\\s*(?:\"[^\"]*\"|'[^']*'|[^\\s\"'=<>`]+))*\\s*(?:\\r?\\n\\s*)?[[{]", "")
	xmlRE := mustJS(t, `^\s*(?:\r?\n\s*)?<(?:function|invoke|parameters?|arguments?)\b`, "i")
	forRandomTexts(t, func(s string) {
		for p := 0; p <= len(s); p++ {
			if jsonPayloadStart(s, p) != jsonRE.MatchString(s[p:]) {
				t.Fatalf("json payload start differs on %q", s[p:])
			}
			if xmlPayloadStart(s, p) != xmlRE.MatchString(s[p:]) {
				t.Fatalf("xml payload start differs on %q", s[p:])
			}
		}
	})
}

func regexCodeRegions(s string) []region {
	fencedRE := regexp.MustCompile("(^|\n)(?:```[^\n]*\n[\\s\\S]*?(?:\n```(?:\n|$)|$)|~~~[^\n]*\n[\\s\\S]*?(?:\n~~~(?:\n|$)|$))")
	inlineRE := regexp.MustCompile("`+[^`]+`+")
	var fenced []region
	for _, m := range fencedRE.FindAllStringSubmatchIndex(s, -1) {
		fenced = append(fenced, region{m[3], m[1]})
	}
	all := append([]region(nil), fenced...)
	for _, m := range inlineRE.FindAllStringIndex(s, -1) {
		inside := false
		for _, r := range fenced {
			inside = inside || (m[0] >= r.start && m[1] <= r.end)
		}
		if !inside {
			all = append(all, region{m[0], m[1]})
		}
	}
	return all
}

func TestDiffCodeRegions(t *testing.T) {
	forRandomTexts(t, func(s string) {
		want := regexCodeRegions(s)
		got := findCodeRegions(s).rs
		w := map[region]bool{}
		for _, r := range want {
			w[r] = true
		}
		if len(got) != len(want) {
			t.Fatalf("%q: regions %v, want %v", s, got, want)
		}
		for _, r := range got {
			if !w[r] {
				t.Fatalf("%q: regions %v, want %v", s, got, want)
			}
		}
	})
}

// regexStripBlocks is the reference's matchAll loop over a tag regex.
func regexStripBlocks(s string, re *regexp.Regexp, regions codeRegions, keepUnclosed bool) string {
	var b strings.Builder
	last, in := 0, false
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		if regions.contains(m[0]) {
			continue
		}
		isClose := m[3] > m[2]
		if !in {
			b.WriteString(s[last:m[0]])
			if !isClose {
				in = true
			}
		} else if isClose {
			in = false
		}
		last = m[1]
	}
	if !in || keepUnclosed {
		b.WriteString(s[last:])
	}
	return b.String()
}

func TestDiffTagStages(t *testing.T) {
	memRE := mustJS(t, `<\s*(\/?)\s*relevant[-_]memories\b[^<>]*>`, "gi")
	thinkRE := mustJS(t, `<\s*(\/?)\s*(?:(?:antml:)?(?:think(?:ing)?|thought)|antthinking)\b[^<>]*>`, "gi")
	finalRE := mustJS(t, `<\s*\/?\s*final\b[^<>]*>`, "gi")
	quickRE := mustJS(t, `<\s*\/?\s*(?:(?:antml:)?(?:think(?:ing)?|thought)|antthinking|final)\b`, "i")
	tokenRE := regexp.MustCompile(`<[|｜][^|｜]*[|｜]>`)
	forRandomTexts(t, func(s string) {
		regions := findCodeRegions(s)
		if got, want := stripBlocks(s, memoriesName, regions, false), regexStripBlocks(s, memRE, regions, false); got != want {
			t.Fatalf("memories on %q:\n got %q\nwant %q", s, got, want)
		}
		if reasoningQuick(s) != quickRE.MatchString(s) {
			t.Fatalf("quick check differs on %q", s)
		}
		var fin strings.Builder
		last := 0
		for _, m := range finalRE.FindAllStringIndex(s, -1) {
			if !regions.contains(m[0]) {
				fin.WriteString(s[last:m[0]])
				last = m[1]
			}
		}
		fin.WriteString(s[last:])
		if got := removeFinalTags(s); got != fin.String() {
			t.Fatalf("final tags on %q: %q vs %q", s, got, fin.String())
		}
		for _, keep := range []bool{false, true} {
			c := findCodeRegions(fin.String())
			if got, want := stripBlocks(fin.String(), thinkingName, c, keep), regexStripBlocks(fin.String(), thinkRE, c, keep); got != want {
				t.Fatalf("thinking on %q:\n got %q\nwant %q", s, got, want)
			}
		}
		var tok strings.Builder
		cursor := 0
		for _, m := range tokenRE.FindAllStringIndex(s, -1) {
			tok.WriteString(s[cursor:m[0]])
			if regions.overlaps(m[0], m[1]) {
				tok.WriteString(s[m[0]:m[1]])
			} else if m[0] > 0 && m[1] < len(s) && !isJSSpaceBefore(s, m[0]) && jsSpaceWidth(s, m[1]) == 0 {
				tok.WriteByte(' ')
			}
			cursor = m[1]
		}
		tok.WriteString(s[cursor:])
		if got := stripModelSpecialTokens(s); got != tok.String() {
			t.Fatalf("tokens on %q: %q vs %q", s, got, tok.String())
		}
	})
}

func TestDiffScaffoldingRegexes(t *testing.T) {
	invokeRE := mustJS(t, `<invoke\b[^>]*>[\s\S]*?<\/invoke>`, "gi")
	markerRE := mustJS(t, `<\/?minimax:tool_call>`, "gi")
	histRE := mustJS(t, `\[Historical context:[^\]]*\]\n?`, "gi")
	callRE := mustJS(t, `\[Tool Call:[^\]]*\]`, "gi")
	forRandomTexts(t, func(s string) {
		want := s
		if strings.Contains(strings.ToLower(s), "minimax:tool_call") {
			want = markerRE.ReplaceAllString(invokeRE.ReplaceAllString(s, ""), "")
		}
		if got := stripMinimaxToolCallXML(s); got != want {
			t.Fatalf("minimax on %q: %q vs %q", s, got, want)
		}
		if got, want := stripHistoricalContext(s), histRE.ReplaceAllString(s, ""); got != want {
			t.Fatalf("historical on %q: %q vs %q", s, got, want)
		}
		got := append([][2]int(nil), bracketMarkers(s, "[tool call:")...)
		ms := callRE.FindAllStringIndex(s, -1)
		if len(ms) != len(got) {
			t.Fatalf("tool call markers on %q: %v vs %v", s, got, ms)
		}
		for i := range ms {
			if ms[i][0] != got[i][0] || ms[i][1] != got[i][1] {
				t.Fatalf("tool call markers on %q: %v vs %v", s, got, ms)
			}
		}
	})
}

var redactFragments = []string{
	" ", "\n", "\u00a0", ",", ";", "=", ":", "?", "&", "#", "/", "\"", "'", "\\", "-", "_", ".",
	"a", "Z", "7", "123456", "1234567", "é", "😀", "KEY", "token", "Secret", "PASSWORD", "passwd",
	"api_key", "api-key", "APIKEY", "access_token", "refresh_token", "my", "bot", "sk-", "ghp_",
	"github_pat_", "xoxb-", "xapp-", "gsk_", "AIza", "pplx-", "npm_", "AKID", "LTAI", "hf_", "r8_",
	"Bearer", "Authorization", "signature", "client_secret", "abcdefghij", "ABCDEFGHIJKLMNOPQRST",
}

func TestAnchoredMatchesEqualFullScan(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 30000; i++ {
		var b strings.Builder
		for n := 1 + rng.Intn(30); n > 0; n-- {
			b.WriteString(redactFragments[rng.Intn(len(redactFragments))])
		}
		s := b.String()
		lower := asciiLower(s)
		for k, p := range defaults() {
			if p.starts == nil {
				continue
			}
			got := findMatches(s, lower, p)
			want := p.re.re.FindAllStringSubmatchIndex(s, -1)
			if len(got) != len(want) {
				t.Fatalf("pattern %d on %q: %v vs %v", k+1, s, got, want)
			}
			for j := range got {
				for x := range got[j] {
					if got[j][x] != want[j][x] {
						t.Fatalf("pattern %d on %q: %v vs %v", k+1, s, got, want)
					}
				}
			}
		}
	}
}
