package sanitize

import "strings"

// Downgraded tool scaffolding: when a transcript is replayed to a provider
// that cannot take structured tool calls, calls and results are flattened to
// text markers. These never belong in visible text:
//
//	[Tool Call: name (ID: ...)]  plus an Arguments: value on the same or the
//	                             next line (JSON, a quoted string, or the rest
//	                             of the line)
//	[Tool Result for ID ...]     and everything up to the next "[Tool " marker
//	                             or the end
//	[Historical context: ...]    plus one following newline
//
// The stage runs only when the text matches /\[Tool (?:Call|Result)/i or
// /\[Historical context/i, and then trims the whole result.

func hasDowngradedMarker(s string) bool {
	return indexFold(s, 0, "[tool call") >= 0 ||
		indexFold(s, 0, "[tool result") >= 0 ||
		indexFold(s, 0, "[historical context") >= 0
}

func stripDowngradedToolText(s string) string {
	if !hasDowngradedMarker(s) {
		return s
	}
	cleaned := stripDowngradedToolCalls(s)
	cleaned = stripToolResultBlocks(cleaned)
	cleaned = stripHistoricalContext(cleaned)
	return trimJS(cleaned)
}

// bracketMarkers returns the non-overlapping matches of /\[PREFIX[^\]]*\]/gi
// (prefix lower-case, without the '['), as [start, end) pairs.
func bracketMarkers(s, prefix string) [][2]int {
	var out [][2]int
	for i := 0; ; {
		st := indexFold(s, i, prefix)
		if st < 0 {
			return out
		}
		rb := indexByteFrom(s, st+len(prefix), ']')
		if rb < 0 {
			return out // no later marker can reach a ']' either
		}
		out = append(out, [2]int{st, rb + 1})
		i = rb + 1
	}
}

type toolCallMarker struct {
	start, end int // the [Tool Call: ...] marker
	argsAt     int // where "arguments" begins, or -1
	valueAt    int // first non-blank after "arguments[:][ ]", or -1
	afterArgs  int // index just after "arguments[:][ ]"
	jsonEnd    int // end of a {...}/[...] value, or -1 when unbalanced
}

func skipSpaceTab(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// toolCallMarkers reads what follows each [Tool Call: ...] marker found:
// where its Arguments label and value are, and where a JSON value ends.
func toolCallMarkers(s string, found [][2]int) []toolCallMarker {
	ms := make([]toolCallMarker, len(found))
	var jsonStarts []int
	var jsonOwner []int
	for k, f := range found {
		m := toolCallMarker{start: f[0], end: f[1], argsAt: -1, valueAt: -1, jsonEnd: -1}
		i := skipLineBreak(s, m.end)
		if hasPrefixFold(s, i, "arguments") {
			m.argsAt = i
			i += len("arguments")
			if i < len(s) && s[i] == ':' {
				i++
			}
			if i < len(s) && s[i] == ' ' {
				i++
			}
			m.afterArgs = i
			for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
				i++
			}
			if i < len(s) {
				m.valueAt = i
				if s[i] == '{' || s[i] == '[' {
					jsonStarts = append(jsonStarts, i)
					jsonOwner = append(jsonOwner, k)
				}
			}
		}
		ms[k] = m
	}
	if len(jsonStarts) > 0 {
		ends := balancedJSONEnds(s, jsonStarts)
		for j, k := range jsonOwner {
			ms[k].jsonEnd = ends[j]
		}
	}
	return ms
}

// skipLineBreak skips spaces and tabs from i, at most one line break (\n,
// \r or \r\n), then spaces and tabs again.
func skipLineBreak(s string, i int) int {
	i = skipSpaceTab(s, i)
	if i < len(s) && s[i] == '\r' {
		i++
		if i < len(s) && s[i] == '\n' {
			i++
		}
	} else if i < len(s) && s[i] == '\n' {
		i++
	}
	return skipSpaceTab(s, i)
}

// stripDowngradedToolCalls removes each [Tool Call: ...] marker with its
// Arguments value, and the line break after them when the text kept so far
// is empty or ends a line.
func stripDowngradedToolCalls(s string) string {
	found := bracketMarkers(s, "[tool call:")
	if len(found) == 0 {
		return s
	}
	ms := toolCallMarkers(s, found)

	var b strings.Builder
	b.Grow(len(s))
	written := 0 // bytes written, to answer "does the result end with a newline?"
	var lastByte byte
	write := func(part string) {
		if part == "" {
			return
		}
		b.WriteString(part)
		written += len(part)
		lastByte = part[len(part)-1]
	}
	var strs stringEnds
	cursor := 0
	for _, m := range ms {
		if m.start < cursor {
			continue
		}
		write(s[cursor:m.start])
		index := skipLineBreak(s, m.end)
		if m.argsAt >= 0 {
			index = m.afterArgs
			if m.valueAt >= 0 {
				switch s[m.valueAt] {
				case '{', '[':
					if m.jsonEnd >= 0 {
						index = m.jsonEnd
					}
				case '"':
					if e := strs.end(s, m.valueAt); e >= 0 {
						index = e
					}
				default:
					e := strings.IndexAny(s[m.valueAt:], "\n\r")
					if e < 0 {
						index = len(s)
					} else {
						index = m.valueAt + e
					}
				}
			}
		}
		if index < len(s) && (s[index] == '\n' || s[index] == '\r') &&
			(written == 0 || lastByte == '\n' || lastByte == '\r') {
			if s[index] == '\r' {
				index++
			}
			if index < len(s) && s[index] == '\n' {
				index++
			}
		}
		cursor = index
	}
	write(s[cursor:])
	return b.String()
}

// stringEnds finds the end of a "..." value (just past the first unescaped
// closing quote), or -1 when it never closes. Queries come in increasing
// order; a quote that starts inside the previous string was escaped there, so
// both scans continue identically and share the previous answer. Each byte is
// therefore scanned about once.
type stringEnds struct {
	start, stop int
	valid       bool
}

func (c *stringEnds) end(s string, p int) int {
	if c.valid && p > c.start && (c.stop < 0 || p < c.stop-1) {
		return c.stop
	}
	end := -1
	escaped := false
	for i := p + 1; i < len(s); i++ {
		ch := s[i]
		if escaped {
			escaped = false
			continue
		}
		if ch == '\\' {
			escaped = true
			continue
		}
		if ch == '"' {
			end = i + 1
			break
		}
	}
	c.start, c.stop, c.valid = p, end, true
	return end
}

// balancedJSONEnds computes, for each start (a '{' or '[' at sorted offsets),
// the reference's brace scan: depth counts {[ up and }] down outside "..."
// strings (with backslash escapes), and the value ends just after the
// bracket that brings depth back to zero; -1 means it never does.
//
// Running each scan separately is quadratic when many Arguments values are
// left unbalanced. All scans instead advance in one pass, grouped by string
// state (outside, inside, just after a backslash). Within a group only the
// depth offset differs, so a group keeps one depth counter and buckets its
// scans by the depth at which each started; groups that reach the same state
// merge, the smaller into the larger.
func balancedJSONEnds(s string, starts []int) []int {
	sc := jsonEndsScan{s: s, starts: starts, ends: make([]int, len(starts)),
		nextOut: newNextAny("\"{}[]"), nextIn: newNextAny("\"\\")}
	for i := range sc.ends {
		sc.ends[i] = -1
	}
	for i := 0; ; {
		sc.admit(i)
		live := sc.live()
		if live == 0 {
			if sc.si >= len(starts) {
				break
			}
			i = starts[sc.si]
			continue
		}
		if i >= len(s) {
			break
		}
		if live == 1 {
			j, done := sc.skip(i)
			if done {
				break
			}
			if j > i {
				i = j
				continue
			}
		}
		sc.step(i)
		i++
	}
	return sc.ends
}

// The string states of a brace scan: outside "...", inside, and just
// after a backslash inside.
const (
	jsonOut = iota
	jsonIn
	jsonEsc
	jsonStates
)

// jsonScanGroup is the scans in one string state: one depth counter, and
// the scans (indices into starts) bucketed by the depth at which each
// started.
type jsonScanGroup struct {
	depth   int
	buckets map[int][]int
	count   int
}

// mergeJSONGroups joins two groups that reached the same state, the
// smaller into the larger.
func mergeJSONGroups(a, b *jsonScanGroup) *jsonScanGroup {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	if a.count < b.count {
		a, b = b, a
	}
	off := a.depth - b.depth
	for base, ids := range b.buckets {
		a.buckets[base+off] = append(a.buckets[base+off], ids...)
	}
	a.count += b.count
	return a
}

// jsonEndsScan is the state of balancedJSONEnds' pass.
type jsonEndsScan struct {
	s      string
	starts []int
	ends   []int
	si     int // the next start to admit
	groups [jsonStates]*jsonScanGroup
	// the next bytes that can change a lone outside or inside group
	nextOut, nextIn nextAny
}

// admit starts the scans that begin at i, outside strings.
func (sc *jsonEndsScan) admit(i int) {
	for sc.si < len(sc.starts) && sc.starts[sc.si] == i {
		g := sc.groups[jsonOut]
		if g == nil {
			g = &jsonScanGroup{buckets: map[int][]int{}}
			sc.groups[jsonOut] = g
		}
		g.buckets[g.depth] = append(g.buckets[g.depth], sc.si)
		g.count++
		sc.si++
	}
}

// live is the number of groups with scans still running.
func (sc *jsonEndsScan) live() int {
	n := 0
	for _, g := range sc.groups {
		if g != nil {
			n++
		}
	}
	return n
}

// skip is, for the one live group, where it can jump from i: the next byte
// that can change it, never past the next start; done when nothing left in
// s can. A group just after a backslash stays at i.
func (sc *jsonEndsScan) skip(i int) (to int, done bool) {
	var j int
	switch {
	case sc.groups[jsonOut] != nil:
		j = sc.nextOut.from(sc.s, i)
	case sc.groups[jsonIn] != nil:
		j = sc.nextIn.from(sc.s, i)
	default:
		return i, false
	}
	limit := len(sc.s)
	if sc.si < len(sc.starts) {
		limit = sc.starts[sc.si]
	}
	return skipTarget(j, limit, len(sc.s))
}

// step moves every live group over s[i]. A bracket that brings a group's
// depth back to a bucket's ends that bucket's scans just after it; groups
// that reach the same state merge.
func (sc *jsonEndsScan) step(i int) {
	c := sc.s[i]
	var ng [jsonStates]*jsonScanGroup
	for st, g := range sc.groups {
		if g == nil {
			continue
		}
		to := st
		switch st {
		case jsonOut:
			switch c {
			case '"':
				to = jsonIn
			case '{', '[':
				g.depth++
			case '}', ']':
				g.depth--
				if ids, ok := g.buckets[g.depth]; ok {
					for _, id := range ids {
						sc.ends[id] = i + 1
					}
					g.count -= len(ids)
					delete(g.buckets, g.depth)
				}
			}
		case jsonIn:
			if c == '\\' {
				to = jsonEsc
			} else if c == '"' {
				to = jsonOut
			}
		case jsonEsc:
			to = jsonIn
		}
		if g.count == 0 {
			continue
		}
		ng[to] = mergeJSONGroups(ng[to], g)
	}
	sc.groups = ng
}

// stripToolResultBlocks is
// /\[Tool Result for ID[^\]]*\]\n?[\s\S]*?(?=\n*\[Tool |\n*$)/gi → "".
// The lazy body stops at the start of the newline run before the next
// "[Tool " marker, or before the trailing newlines of the text; those
// newlines are kept.
func stripToolResultBlocks(s string) string {
	var b strings.Builder
	last := 0
	changed := false
	for i := 0; ; {
		st := indexFold(s, i, "[tool result for id")
		if st < 0 {
			break
		}
		rb := indexByteFrom(s, st+len("[tool result for id"), ']')
		if rb < 0 {
			break
		}
		c0 := rb + 1
		if c0 < len(s) && s[c0] == '\n' {
			c0++
		}
		stop := len(s)
		if t := indexFold(s, c0, "[tool "); t >= 0 {
			stop = t
		}
		x := stop
		for x > c0 && s[x-1] == '\n' {
			x--
		}
		if !changed {
			b.Grow(len(s))
			changed = true
		}
		b.WriteString(s[last:st])
		last, i = x, x
	}
	if !changed {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// stripHistoricalContext is /\[Historical context:[^\]]*\]\n?/gi → "".
func stripHistoricalContext(s string) string {
	found := bracketMarkers(s, "[historical context:")
	if len(found) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, f := range found {
		b.WriteString(s[last:f[0]])
		last = f[1]
		if last < len(s) && s[last] == '\n' {
			last++
		}
	}
	b.WriteString(s[last:])
	return b.String()
}
