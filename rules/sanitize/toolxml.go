package sanitize

import (
	"strings"
	"unicode/utf8"
)

// Plain-text tool-call XML that a model printed instead of calling a tool.
// Tag names: tool_call, tool_result, function_call, function_calls,
// tool_calls (case-insensitive; the name must end at whitespace, '/' or '>').
//
//   - An opening tag followed by a payload start hides everything up to its
//     matching closing tag (tags included), or to the end of the text. The
//     payload start is optional attributes, then optional whitespace, then '['
//     or '{'; tool_call also accepts an XML child <function|invoke|
//     parameter(s)|argument(s)>.
//   - </tool_call> also ends a tool_result block; </tool_result> does not end
//     a tool_call block.
//   - For a JSON payload, a closing tag that falls inside a quoted string of the
//     payload does not end the block. XML payloads are prose-like (they contain
//     apostrophes), so the quote rule applies to JSON payloads only, as in the
//     reference version that introduced XML payload detection.
//   - An opening tag that never reaches '>' and has a payload start hides the
//     rest of the text.
//   - An opening tag without a payload start is a prose mention: it is kept and
//     remembered, and its matching closing tag is kept too.
//   - Self-closing tags and unmatched closing tags are removed.
//   - Tags starting inside code regions are left alone.

// toolTagNames is indexed by toolTag.name.
var toolTagNames = [...]string{"tool_call", "tool_result", "function_call", "function_calls", "tool_calls"}

const (
	nameToolCall   = 0
	nameToolResult = 1
)

type toolTag struct {
	lt           int  // the '<'
	contentStart int  // just after the name
	close        int  // index of the closing '>', or -1 when truncated
	name         int8 // index into toolTagNames
	isClose      bool
}

func (t *toolTag) truncated() bool { return t.close < 0 }

func (t *toolTag) end(n int) int {
	if t.close < 0 {
		return n
	}
	return t.close + 1
}

func (t *toolTag) selfClosing(s string) bool {
	if t.close < 0 || t.isClose {
		return false
	}
	e := t.close
	for e > t.contentStart && isJSSpaceBefore(s, e) {
		_, w := utf8.DecodeLastRuneInString(s[:e])
		e -= w
	}
	return e > t.contentStart && s[e-1] == '/'
}

func isTagNameByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// parseToolTagHead parses the head of a tool tag at s[lt] == '<'.
func parseToolTagHead(s string, lt int) (toolTag, bool) {
	i := skipJSSpace(s, lt+1)
	isClose := false
	if i < len(s) && s[i] == '/' {
		isClose = true
		i = skipJSSpace(s, i+1)
	}
	ns := i
	for i < len(s) && isTagNameByte(s[i]) {
		i++
	}
	name := int8(-1)
	for k, n := range toolTagNames {
		if equalFoldASCII(s[ns:i], n) {
			name = int8(k)
			break
		}
	}
	if name < 0 {
		return toolTag{}, false
	}
	if i < len(s) && s[i] != '/' && s[i] != '>' && jsSpaceWidth(s, i) == 0 {
		return toolTag{}, false
	}
	return toolTag{lt: lt, contentStart: i, close: -1, name: name, isClose: isClose}, true
}

// findToolTags returns every tool tag head in s, with each tag's closing '>'
// resolved as the reference's quote-aware findTagCloseIndex would: scanning
// from the end of the name, skipping '...' and "..." (with backslash
// escapes), stopping at the first '>' or failing at the first '<' outside
// quotes.
//
// The reference rescans from every tag, which is quadratic when tags hide in
// each other's unclosed quotes. Here all scans advance together in one pass:
// scans in the same quote state at the same position behave identically from
// then on, so they share a list, and at most five lists (one per state) are
// live at any position.
func findToolTags(s string) []toolTag {
	tags := make([]toolTag, 0, min(strings.Count(s, "<"), 1<<16))
	for i := 0; ; {
		lt := indexByteFrom(s, i, '<')
		if lt < 0 {
			break
		}
		if t, ok := parseToolTagHead(s, lt); ok {
			tags = append(tags, t)
		}
		i = lt + 1
	}
	if len(tags) == 0 {
		return nil
	}
	resolveTagCloses(s, tags)
	return tags
}

const (
	qNone = iota
	qDouble
	qDoubleEsc
	qSingle
	qSingleEsc
	qStates
)

type scanLists struct {
	head, tail [qStates]int32
	next       []int32
}

func (l *scanLists) empty() bool {
	for _, h := range l.head {
		if h >= 0 {
			return false
		}
	}
	return true
}

// resolveTagCloses sets the close of every tag, by the scan findToolTags
// describes.
func resolveTagCloses(s string, tags []toolTag) {
	sc := tagCloseScan{s: s, tags: tags, l: scanLists{next: make([]int32, len(tags))},
		nextNone: newNextAny("\"'<>"), nextDouble: newNextAny("\"\\"), nextSingle: newNextAny("'\\")}
	sc.l.head, sc.l.tail = noLists()
	for i := 0; ; {
		sc.admit(i)
		if sc.l.empty() {
			if sc.ti >= len(tags) {
				return
			}
			i = tags[sc.ti].contentStart
			continue
		}
		if i >= len(s) {
			break
		}
		j, done := sc.skip(i)
		if done {
			break
		}
		if j > i {
			i = j
			continue
		}
		sc.step(i)
		i++
	}
	for st := 0; st < qStates; st++ {
		sc.resolve(sc.l.head[st], -1)
	}
}

// noLists is the heads and tails of no lists.
func noLists() (head, tail [qStates]int32) {
	for k := range head {
		head[k], tail[k] = -1, -1
	}
	return head, tail
}

// push appends the list lh..lt to the list of state st in h and t.
func (l *scanLists) push(h, t *[qStates]int32, st int, lh, lt int32) {
	if lh < 0 {
		return
	}
	if h[st] < 0 {
		h[st], t[st] = lh, lt
		return
	}
	l.next[t[st]] = lh
	t[st] = lt
}

// tagCloseScan is the state of resolveTagCloses' pass.
type tagCloseScan struct {
	s    string
	tags []toolTag
	l    scanLists
	ti   int // the next tag to admit
	// Cached next positions of the bytes that can change each state's scan.
	nextNone, nextDouble, nextSingle nextAny
}

// admit starts the scans of the tags whose names end at i, outside quotes.
func (sc *tagCloseScan) admit(i int) {
	for sc.ti < len(sc.tags) && sc.tags[sc.ti].contentStart == i {
		sc.l.next[sc.ti] = -1
		sc.l.push(&sc.l.head, &sc.l.tail, qNone, int32(sc.ti), int32(sc.ti))
		sc.ti++
	}
}

// resolve sets the close of every tag on the list starting at lh.
func (sc *tagCloseScan) resolve(lh int32, val int) {
	for k := lh; k >= 0; k = sc.l.next[k] {
		sc.tags[k].close = val
	}
}

// skip is the fast path: when one state alone is live, and it is not just
// after a backslash, the scan jumps from i to the next byte that can change
// that state (or to the next scan's start); done when nothing left in s
// can. Otherwise it stays at i.
func (sc *tagCloseScan) skip(i int) (to int, done bool) {
	live, single := -1, true
	for st := 0; st < qStates; st++ {
		if sc.l.head[st] >= 0 {
			if live >= 0 {
				single = false
			}
			live = st
		}
	}
	if !single || (live != qNone && live != qDouble && live != qSingle) {
		return i, false
	}
	limit := len(sc.s)
	if sc.ti < len(sc.tags) {
		limit = sc.tags[sc.ti].contentStart
	}
	var j int
	switch live {
	case qNone:
		j = sc.nextNone.from(sc.s, i)
	case qDouble:
		j = sc.nextDouble.from(sc.s, i)
	default:
		j = sc.nextSingle.from(sc.s, i)
	}
	return skipTarget(j, limit, len(sc.s))
}

// step moves every live list over s[i]: quotes and backslashes change its
// state; outside quotes, '>' closes its tags there and '<' fails them.
func (sc *tagCloseScan) step(i int) {
	c := sc.s[i]
	nh, nt := noLists()
	for st := 0; st < qStates; st++ {
		lh, ltl := sc.l.head[st], sc.l.tail[st]
		if lh < 0 {
			continue
		}
		to := st
		switch st {
		case qNone:
			switch c {
			case '"':
				to = qDouble
			case '\'':
				to = qSingle
			case '<':
				sc.resolve(lh, -1)
				continue
			case '>':
				sc.resolve(lh, i)
				continue
			}
		case qDouble:
			if c == '\\' {
				to = qDoubleEsc
			} else if c == '"' {
				to = qNone
			}
		case qDoubleEsc:
			to = qDouble
		case qSingle:
			if c == '\\' {
				to = qSingleEsc
			} else if c == '\'' {
				to = qNone
			}
		case qSingleEsc:
			to = qSingle
		}
		sc.l.push(&nh, &nt, to, lh, ltl)
	}
	sc.l.head, sc.l.tail = nh, nt
}

// nextAny remembers where the next byte of set is, so a scanner that skips
// ahead over uninteresting bytes searches each byte of s at most once.
type nextAny struct {
	set string
	pos int // -2: not searched yet; -1: none left
}

func newNextAny(set string) nextAny { return nextAny{set: set, pos: -2} }

// from returns the index of the first byte of set at or after i, or -1.
func (n *nextAny) from(s string, i int) int {
	if n.pos != -1 && n.pos < i {
		n.pos = indexAnyFrom(s, i, n.set)
	}
	return n.pos
}

// skipTarget turns the next interesting index j into where a skip-ahead
// scanner resumes: never past limit (the next tag to look at). done means
// nothing interesting is left before the end of s.
func skipTarget(j, limit, n int) (to int, done bool) {
	if j < 0 || j > limit {
		if limit >= n {
			return 0, true
		}
		return limit, false
	}
	return j, false
}

func indexAnyFrom(s string, from int, chars string) int {
	if from >= len(s) {
		return -1
	}
	j := strings.IndexAny(s[from:], chars)
	if j < 0 {
		return -1
	}
	return from + j
}

// jsonPayloadStart reports whether s[p:] matches
// /^(?:\s+[A-Za-z_:][-A-Za-z0-9_:.]*\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))*\s*(?:\r?\n\s*)?[[{]/.
// The matcher is a single forward pass: the only backtracking that can change
// the answer is shortening an unquoted value so that a '[' or '{' inside it
// starts the payload, which is checked as the value is read.
func jsonPayloadStart(s string, p int) bool {
	pos := p
	for {
		q := skipJSSpace(s, pos)
		if q < len(s) && (s[q] == '[' || s[q] == '{') {
			return true
		}
		if q == pos || q >= len(s) || !isAttrNameStart(s[q]) {
			return false
		}
		q++
		for q < len(s) && isAttrNameByte(s[q]) {
			q++
		}
		q = skipJSSpace(s, q)
		if q >= len(s) || s[q] != '=' {
			return false
		}
		q = skipJSSpace(s, q+1)
		if q >= len(s) {
			return false
		}
		switch s[q] {
		case '"', '\'':
			e := indexByteFrom(s, q+1, s[q])
			if e < 0 {
				return false
			}
			pos = e + 1
		default:
			start := q
			for q < len(s) && unquotedValueWidth(s, q) > 0 {
				if q > start && (s[q] == '[' || s[q] == '{') {
					return true
				}
				q += unquotedValueWidth(s, q)
			}
			if q == start {
				return false
			}
			pos = q
		}
	}
}

func isAttrNameStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isAttrNameByte(c byte) bool {
	return isAttrNameStart(c) || c == '-' || c == '.' || (c >= '0' && c <= '9')
}

// unquotedValueWidth returns the width of the character at s[i] when it
// belongs to [^\s"'=<>`], else 0.
func unquotedValueWidth(s string, i int) int {
	switch s[i] {
	case '"', '\'', '=', '<', '>', '`':
		return 0
	}
	if jsSpaceWidth(s, i) > 0 {
		return 0
	}
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, w := utf8.DecodeRuneInString(s[i:])
	return w
}

// xmlPayloadStart reports whether s[p:] matches
// /^\s*(?:\r?\n\s*)?<(?:function|invoke|parameters?|arguments?)\b/i.
func xmlPayloadStart(s string, p int) bool {
	q := skipJSSpace(s, p)
	if q >= len(s) || s[q] != '<' {
		return false
	}
	word := s[q+1 : wordRunEnd(s, q+1)]
	switch strings.ToLower(word) {
	case "function", "invoke", "parameter", "parameters", "argument", "arguments":
		return true
	}
	return false
}

// quoteScanner answers "does the payload text [start, end) end inside a quoted
// string?" for increasing end positions in one monotonic pass.
type quoteScanner struct {
	cursor  int
	quote   byte
	escaped bool
}

func (q *quoteScanner) insideAt(s string, end int) bool {
	for ; q.cursor < end; q.cursor++ {
		c := s[q.cursor]
		switch {
		case q.quote == 0:
			if c == '"' || c == '\'' {
				q.quote = c
			}
		case q.escaped:
			q.escaped = false
		case c == '\\':
			q.escaped = true
		case c == q.quote:
			q.quote = 0
		}
	}
	return q.quote != 0
}

func stripToolCallXML(s string) string {
	if strings.IndexByte(s, '<') < 0 {
		return s
	}
	tags := findToolTags(s)
	if len(tags) == 0 {
		return s
	}
	regions := findCodeRegions(s)
	var b strings.Builder
	b.Grow(len(s))
	n := len(s)
	last, next := 0, 0
	inBlock, blockName, blockJSON := false, int8(-1), false
	var qs quoteScanner
	var balance [len(toolTagNames)]int
	for k := range tags {
		t := &tags[k]
		if t.lt < next {
			continue
		}
		if !inBlock && regions.contains(t.lt) {
			continue
		}
		end := t.end(n)
		if !inBlock {
			b.WriteString(s[last:t.lt])
			if t.isClose {
				if t.truncated() {
					b.WriteString(s[t.lt:t.contentStart])
					last, next = t.contentStart, t.contentStart
					continue
				}
				if balance[t.name] > 0 {
					b.WriteString(s[t.lt:end])
					balance[t.name]--
				}
				last, next = end, end
				continue
			}
			if t.selfClosing(s) {
				last, next = end, end
				continue
			}
			payloadStart := end
			if t.truncated() {
				payloadStart = t.contentStart
			}
			isJSON := jsonPayloadStart(s, payloadStart)
			isXML := !isJSON && t.name == nameToolCall && xmlPayloadStart(s, payloadStart)
			if !isJSON && !isXML {
				preserveEnd := end
				if t.truncated() {
					preserveEnd = t.contentStart
				} else {
					balance[t.name]++
				}
				b.WriteString(s[t.lt:preserveEnd])
				last, next = preserveEnd, preserveEnd
				continue
			}
			inBlock, blockName, blockJSON = true, t.name, isJSON
			qs = quoteScanner{cursor: end}
			if t.truncated() {
				last = n
				break
			}
		} else if t.isClose &&
			(t.name == blockName || (blockName == nameToolResult && t.name == nameToolCall)) &&
			(!blockJSON || !qs.insideAt(s, t.lt)) {
			inBlock = false
		}
		last, next = end, end
	}
	if !inBlock {
		b.WriteString(s[last:])
	}
	return b.String()
}
