package sanitize

import "strings"

// Leaked model control tokens: /<[|｜][^|｜]*[|｜]>/g, ASCII '|' or the
// full-width '｜' (U+FF5C). A token touching a code region is kept so that
// documentation about the tokens survives. Removing a token between two
// non-whitespace characters of the original text leaves one space, so
// "hello<|im_end|>world" does not fuse into one word.

const fullWidthPipe = "｜"

// pipeAt returns the byte width of a pipe ('|' or '｜') at s[i], or 0.
func pipeAt(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	if s[i] == '|' {
		return 1
	}
	if strings.HasPrefix(s[i:], fullWidthPipe) {
		return len(fullWidthPipe)
	}
	return 0
}

// nextSpecialToken finds the next token match at or after from, returning its
// byte span, or ok=false when no further match exists.
func nextSpecialToken(s string, from int) (start, end int, ok bool) {
	for i := from; ; {
		lt := indexByteFrom(s, i, '<')
		if lt < 0 {
			return 0, 0, false
		}
		w := pipeAt(s, lt+1)
		if w == 0 {
			i = lt + 1
			continue
		}
		body := lt + 1 + w
		k := strings.IndexAny(s[body:], "|"+fullWidthPipe)
		if k < 0 {
			// No later '<' can be followed by a pipe either.
			return 0, 0, false
		}
		q := body + k
		pw := pipeAt(s, q)
		if q+pw < len(s) && s[q+pw] == '>' {
			return lt, q + pw + 1, true
		}
		i = lt + 1
	}
}

func stripModelSpecialTokens(s string) string {
	start, end, ok := nextSpecialToken(s, 0)
	if !ok {
		return s
	}
	regions := findCodeRegions(s)
	var b strings.Builder
	b.Grow(len(s))
	cursor := 0
	for ok {
		b.WriteString(s[cursor:start])
		if regions.overlaps(start, end) {
			b.WriteString(s[start:end])
		} else if start > 0 && end < len(s) && !isJSSpaceBefore(s, start) && jsSpaceWidth(s, end) == 0 {
			b.WriteByte(' ')
		}
		cursor = end
		start, end, ok = nextSpecialToken(s, end)
	}
	b.WriteString(s[cursor:])
	return b.String()
}
