package sanitize

import "strings"

// redactState is the evolving text with the derived forms the patterns
// need, recomputed only after a pattern changes the text.
type redactState struct {
	s      string
	lower  string
	bounds []int // chunk byte offsets, or nil when the text is one chunk
	fresh  bool
}

func (st *redactState) set(s, lower string) {
	st.s, st.lower, st.fresh = s, lower, false
}

func (st *redactState) derive() {
	if st.fresh {
		return
	}
	st.bounds = nil
	if len(st.s) > redactChunkThreshold && utf16Len(st.s) > redactChunkThreshold {
		st.bounds = utf16ChunkBounds(st.s, redactChunkSize)
	}
	st.fresh = true
}

func redactText(s string, patterns []*redactPattern) string {
	if s == "" {
		return s
	}
	var st redactState
	st.set(s, asciiLower(s))
	for _, p := range patterns {
		st.derive()
		if p.needles != nil {
			hit := false
			for _, n := range p.needles {
				if strings.Contains(st.lower, n) {
					hit = true
					break
				}
			}
			if !hit {
				continue
			}
		}
		if out, lower, changed := replaceBounded(&st, p); changed {
			st.set(out, lower)
		}
	}
	return st.s
}

// asciiLower lower-cases ASCII letters only, matching how the patterns fold
// and keeping byte offsets.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return s
}

// replaceBounded applies one pattern, chunk-wise above the threshold, and
// returns the new text with its lower-cased form.
func replaceBounded(st *redactState, p *redactPattern) (string, string, bool) {
	if st.bounds == nil {
		return replaceAll(st.s, st.lower, p)
	}
	var b, bl strings.Builder
	changed := false
	for i := 1; i < len(st.bounds); i++ {
		lo, hi := st.bounds[i-1], st.bounds[i]
		out, lower, c := replaceAll(st.s[lo:hi], st.lower[lo:hi], p)
		changed = changed || c
		b.WriteString(out)
		bl.WriteString(lower)
	}
	if !changed {
		return st.s, st.lower, false
	}
	return b.String(), bl.String(), true
}

// findMatches is FindAllStringSubmatchIndex, via the anchored candidates when
// the pattern has them. None of those patterns can match the empty string, so
// "next match at or after the previous end" is all FindAll does.
func findMatches(s, lower string, p *redactPattern) [][]int {
	if p.starts == nil {
		return p.re.re.FindAllStringSubmatchIndex(s, -1)
	}
	var out [][]int
	cursor := 0
	for _, st := range p.starts(s, lower) {
		if st < cursor {
			continue
		}
		m := p.anchored.FindStringSubmatchIndex(s[st:])
		if m == nil {
			continue
		}
		for k := range m {
			if m[k] >= 0 {
				m[k] += st
			}
		}
		out = append(out, m)
		cursor = m[1]
	}
	return out
}

// replaceAll is String.prototype.replace with a global regex and the
// redaction callback. Go skips an empty match that abuts the previous match
// where JavaScript would report it; only user patterns that match the empty
// string can tell the difference.
func replaceAll(s, lower string, p *redactPattern) (string, string, bool) {
	ms := findMatches(s, lower, p)
	if len(ms) == 0 {
		return s, lower, false
	}
	var b, bl strings.Builder
	b.Grow(len(s))
	bl.Grow(len(s))
	prev, changed := 0, false
	for _, m := range ms {
		if p.re.sticky && m[0] != prev {
			break
		}
		r := redactMatch(s, m)
		changed = changed || r != s[m[0]:m[1]]
		b.WriteString(s[prev:m[0]])
		b.WriteString(r)
		bl.WriteString(lower[prev:m[0]])
		bl.WriteString(asciiLower(r))
		prev = m[1]
	}
	if !changed {
		return s, lower, false
	}
	b.WriteString(s[prev:])
	bl.WriteString(lower[prev:])
	return b.String(), bl.String(), true
}

func redactMatch(s string, m []int) string {
	match := s[m[0]:m[1]]
	if strings.Contains(match, "PRIVATE KEY-----") {
		return redactPEMBlock(match)
	}
	for g := len(m)/2 - 1; g >= 1; g-- {
		ts, te := m[2*g], m[2*g+1]
		if ts >= 0 && te > ts {
			return s[m[0]:ts] + maskToken(s[ts:te]) + s[te:m[1]]
		}
	}
	return maskToken(match)
}

// maskToken masks a token: `***` when short, else its first 6 and last 4
// characters around an ellipsis. A token that already has a mask's shape
// (a user pattern masked it, and a default matches it again) is kept, so
// masking twice leaves what masking once did.
func maskToken(token string) string {
	if isMask(token) {
		return token
	}
	if utf16Len(token) < redactMinLength {
		return "***"
	}
	return token[:utf16PrefixEnd(token, redactKeepStart)] + "…" + token[utf16SuffixStart(token, redactKeepEnd):]
}

// redactPEMBlock keeps the BEGIN and END lines: block.split(/\r?\n/) with
// empty lines dropped; fewer than two lines leaves nothing to show.
func redactPEMBlock(block string) string {
	parts := strings.Split(block, "\n")
	var lines []string
	for i, p := range parts {
		if i < len(parts)-1 {
			p = strings.TrimSuffix(p, "\r")
		}
		if p != "" {
			lines = append(lines, p)
		}
	}
	if len(lines) < 2 {
		return "***"
	}
	return lines[0] + "\n…redacted…\n" + lines[len(lines)-1]
}

// isMask reports a token that is the output of maskToken.
func isMask(token string) bool {
	if token == "***" {
		return true
	}
	head, tail, ok := strings.Cut(token, "…")
	return ok && utf16Len(head) == redactKeepStart && utf16Len(tail) == redactKeepEnd && !strings.Contains(tail, "…")
}
