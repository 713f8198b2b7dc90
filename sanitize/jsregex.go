package sanitize

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Redaction patterns are written in JavaScript syntax (the defaults are the
// reference's literals; logging.redactPatterns come from OpenClaw configs).
// compileJSRegex translates one into RE2 syntax, keeping JavaScript semantics
// where they differ from Go's:
//
//   - \s, \S and trimming use JavaScript's whitespace set (Unicode spaces);
//   - "." excludes \n, \r, U+2028 and U+2029 unless the s flag is set;
//   - the i flag folds case the JavaScript way: ASCII letters pair only with
//     ASCII letters (Go's (?i) would also let "s" match "ſ" and "k" match the
//     Kelvin sign), and a negated class is folded before it is negated;
//   - \uXXXX escapes (surrogate pairs combined), \xHH, \cX, \0 and identity
//     escapes are literals, never Go's \A, \z, \Q... meanings;
//   - a '{' that does not start a valid quantifier is a literal.
//
// Back-references, named back-references and lookaround cannot be expressed
// in RE2 and are rejected with an error naming the construct. Go's regexp is
// linear-time, so no translated pattern can backtrack catastrophically.

type jsRegex struct {
	re     *regexp.Regexp
	sticky bool
	source string
}

var errUnsupported = errors.New("unsupported by RE2")

func compileJSRegex(source, flags string) (*jsRegex, error) {
	var fl jsFlags
	for _, f := range flags {
		switch f {
		case 'g', 'd':
		case 'i':
			fl.ignoreCase = true
		case 'm':
			fl.multiline = true
		case 's':
			fl.dotAll = true
		case 'u', 'v':
			fl.unicode = true
		case 'y':
			fl.sticky = true
		default:
			return nil, fmt.Errorf("unknown flag %q", f)
		}
	}
	t := jsTranslator{src: []rune(source), fl: fl}
	out, err := t.translate()
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(out)
	if err != nil {
		return nil, err
	}
	return &jsRegex{re: re, sticky: fl.sticky, source: source}, nil
}

type jsFlags struct {
	ignoreCase, multiline, dotAll, unicode, sticky bool
}

type jsTranslator struct {
	src []rune
	pos int
	fl  jsFlags
	out strings.Builder
}

// runeSet is a sorted list of disjoint inclusive ranges.
type runeSet [][2]rune

func (rs runeSet) normalize() runeSet {
	if len(rs) == 0 {
		return rs
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	out := runeSet{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r[0] <= last[1]+1 {
			if r[1] > last[1] {
				last[1] = r[1]
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func (rs runeSet) complement() runeSet {
	rs = rs.normalize()
	var out runeSet
	next := rune(0)
	for _, r := range rs {
		if r[0] > next {
			out = append(out, [2]rune{next, r[0] - 1})
		}
		next = r[1] + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, [2]rune{next, unicode.MaxRune})
	}
	return out
}

var (
	jsSpaceSet = runeSet{{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680},
		{0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
		{0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
	jsDigitSet   = runeSet{{'0', '9'}}
	jsWordSet    = runeSet{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	jsLineTerms  = runeSet{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}
	jsEverything = runeSet{{0, unicode.MaxRune}}
)

// jsCanonical is the non-unicode i-flag canonicalization: upper-case, unless
// that would map a non-ASCII character to ASCII.
func jsCanonical(r rune) rune {
	if r > 0xFFFF {
		return r // surrogate halves have no case
	}
	u := unicode.ToUpper(r)
	if r >= 0x80 && u < 0x80 {
		return r
	}
	return u
}

// caseVariants returns the characters the i flag treats as equal to r.
func caseVariants(r rune, unicodeMode bool) []rune {
	cands := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		cands = append(cands, f)
	}
	cands = append(cands, unicode.ToUpper(r), unicode.ToLower(r), unicode.ToTitle(r))
	if unicodeMode {
		return cands
	}
	want := jsCanonical(r)
	out := cands[:0:0]
	for _, c := range cands {
		if c <= 0xFFFF && jsCanonical(c) == want {
			out = append(out, c)
		}
	}
	return out
}

func (rs runeSet) fold(unicodeMode bool) runeSet {
	out := append(runeSet(nil), rs...)
	for _, rg := range rs {
		for _, cr := range unicode.CaseRanges {
			lo, hi := max(rg[0], rune(cr.Lo)), min(rg[1], rune(cr.Hi))
			for r := lo; r <= hi; r++ {
				for _, v := range caseVariants(r, unicodeMode) {
					out = append(out, [2]rune{v, v})
				}
			}
		}
	}
	return out.normalize()
}

// writeSet emits a set as an explicit RE2 class; surrogates are dropped (they
// cannot occur in Go strings) and an empty set becomes a never-matching class.
func writeSet(b *strings.Builder, rs runeSet) {
	rs = rs.normalize()
	var clean runeSet
	for _, r := range rs {
		if r[1] < 0xD800 || r[0] > 0xDFFF {
			clean = append(clean, r)
			continue
		}
		if r[0] < 0xD800 {
			clean = append(clean, [2]rune{r[0], 0xD7FF})
		}
		if r[1] > 0xDFFF {
			clean = append(clean, [2]rune{0xE000, r[1]})
		}
	}
	if len(clean) == 0 {
		b.WriteString(`[^\x00-\x{10FFFF}]`)
		return
	}
	b.WriteByte('[')
	for _, r := range clean {
		fmt.Fprintf(b, `\x{%x}`, r[0])
		if r[1] != r[0] {
			fmt.Fprintf(b, `-\x{%x}`, r[1])
		}
	}
	b.WriteByte(']')
}

func (t *jsTranslator) peek(off int) rune {
	if t.pos+off < len(t.src) {
		return t.src[t.pos+off]
	}
	return -1
}

func (t *jsTranslator) translate() (string, error) {
	for t.pos < len(t.src) {
		c := t.src[t.pos]
		switch c {
		case '\\':
			set, lit, special, err := t.escape(false)
			if err != nil {
				return "", err
			}
			switch {
			case special != "":
				t.out.WriteString(special)
			case set != nil:
				writeSet(&t.out, set)
			default:
				t.literal(lit)
			}
		case '[':
			set, err := t.class()
			if err != nil {
				return "", err
			}
			writeSet(&t.out, set)
		case '.':
			t.pos++
			if t.fl.dotAll {
				writeSet(&t.out, jsEverything)
			} else {
				writeSet(&t.out, jsLineTerms.complement())
			}
		case '^', '$':
			t.pos++
			if t.fl.multiline {
				t.out.WriteString("(?m:" + string(c) + ")")
			} else {
				t.out.WriteRune(c)
			}
		case '(':
			if err := t.group(); err != nil {
				return "", err
			}
		case ')', '|', '*', '+', '?':
			t.pos++
			t.out.WriteRune(c)
		case '{':
			if q, ok := t.quantifierAt(); ok {
				t.out.WriteString(q)
			} else {
				t.pos++
				t.out.WriteString(`\{`)
			}
		default:
			t.pos++
			t.literal(c)
		}
	}
	return t.out.String(), nil
}

func (t *jsTranslator) literal(r rune) {
	if t.fl.ignoreCase {
		set := runeSet{}
		for _, v := range caseVariants(r, t.fl.unicode) {
			set = append(set, [2]rune{v, v})
		}
		// An astral character outside /u mode has no variants (JS sees two
		// surrogates, which have no case): the set is empty, the literal stays.
		if set = set.normalize(); len(set) > 1 || len(set) == 1 && set[0][0] != set[0][1] {
			writeSet(&t.out, set)
			return
		}
	}
	t.out.WriteString(regexp.QuoteMeta(string(r)))
}

// quantifierAt reads {n}, {n,} or {n,m} at t.pos.
func (t *jsTranslator) quantifierAt() (string, bool) {
	i := t.pos + 1
	digits := func() (string, bool) {
		st := i
		for i < len(t.src) && t.src[i] >= '0' && t.src[i] <= '9' {
			i++
		}
		return string(t.src[st:i]), i > st
	}
	lo, ok := digits()
	if !ok {
		return "", false
	}
	q := "{" + lo
	if i < len(t.src) && t.src[i] == ',' {
		i++
		hi, _ := digits()
		q += "," + hi
	}
	if i >= len(t.src) || t.src[i] != '}' {
		return "", false
	}
	t.pos = i + 1
	return q + "}", true
}

func (t *jsTranslator) group() error {
	t.pos++
	if t.peek(0) != '?' {
		t.out.WriteByte('(')
		return nil
	}
	switch t.peek(1) {
	case ':':
		t.pos += 2
		t.out.WriteString("(?:")
		return nil
	case '=', '!':
		return fmt.Errorf("lookahead (?%c...) is %w", t.peek(1), errUnsupported)
	case '<':
		if p := t.peek(2); p == '=' || p == '!' {
			return fmt.Errorf("lookbehind (?<%c...) is %w", p, errUnsupported)
		}
		end := t.pos + 2
		for end < len(t.src) && t.src[end] != '>' {
			end++
		}
		if end >= len(t.src) {
			return errors.New("unterminated group name")
		}
		name := string(t.src[t.pos+2 : end])
		t.pos = end + 1
		t.out.WriteString("(?P<" + name + ">")
		return nil
	}
	return fmt.Errorf("group syntax (?%c is %w", t.peek(1), errUnsupported)
}

// escape reads an escape at t.pos (a backslash). It returns either a set, a
// literal rune, or special RE2 syntax (word boundaries).
func (t *jsTranslator) escape(inClass bool) (set runeSet, lit rune, special string, err error) {
	t.pos++
	if t.pos >= len(t.src) {
		return nil, 0, "", errors.New(`\ at end of pattern`)
	}
	c := t.src[t.pos]
	t.pos++
	switch c {
	case 'd':
		return jsDigitSet, 0, "", nil
	case 'D':
		return jsDigitSet.complement(), 0, "", nil
	case 'w':
		return jsWordSet, 0, "", nil
	case 'W':
		return jsWordSet.complement(), 0, "", nil
	case 's':
		return jsSpaceSet, 0, "", nil
	case 'S':
		return jsSpaceSet.complement(), 0, "", nil
	case 'b':
		if inClass {
			return nil, '\b', "", nil
		}
		return nil, 0, `\b`, nil
	case 'B':
		if inClass {
			return nil, 'B', "", nil
		}
		return nil, 0, `\B`, nil
	case 'n':
		return nil, '\n', "", nil
	case 'r':
		return nil, '\r', "", nil
	case 't':
		return nil, '\t', "", nil
	case 'v':
		return nil, '\v', "", nil
	case 'f':
		return nil, '\f', "", nil
	case '0':
		if d := t.peek(0); d >= '0' && d <= '9' {
			return nil, 0, "", fmt.Errorf("octal escape is %w", errUnsupported)
		}
		return nil, 0, "", nil
	case 'c':
		if l := t.peek(0); (l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z') {
			t.pos++
			return nil, l % 32, "", nil
		}
		t.pos--
		return nil, '\\', "", nil
	case 'x':
		if h, ok := t.hex(2); ok {
			return nil, h, "", nil
		}
		return nil, 'x', "", nil
	case 'u':
		if t.fl.unicode && t.peek(0) == '{' {
			end := t.pos + 1
			for end < len(t.src) && t.src[end] != '}' {
				end++
			}
			v, perr := strconv.ParseUint(string(t.src[t.pos+1:end]), 16, 32)
			if end >= len(t.src) || perr != nil || v > unicode.MaxRune {
				return nil, 0, "", errors.New(`invalid \u{...} escape`)
			}
			t.pos = end + 1
			return nil, rune(v), "", nil
		}
		h, ok := t.hex(4)
		if !ok {
			return nil, 'u', "", nil
		}
		if h >= 0xD800 && h <= 0xDBFF && t.peek(0) == '\\' && t.peek(1) == 'u' {
			save := t.pos
			t.pos += 2
			if lo, ok := t.hex(4); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return nil, (h-0xD800)<<10 + (lo - 0xDC00) + 0x10000, "", nil
			}
			t.pos = save
		}
		if h >= 0xD800 && h <= 0xDFFF {
			return runeSet{}, 0, "", nil // a lone surrogate matches nothing in Go text
		}
		return nil, h, "", nil
	case 'p', 'P':
		if !t.fl.unicode {
			return nil, c, "", nil
		}
		if t.peek(0) != '{' {
			return nil, 0, "", errors.New(`invalid \p escape`)
		}
		end := t.pos + 1
		for end < len(t.src) && t.src[end] != '}' {
			end++
		}
		if end >= len(t.src) {
			return nil, 0, "", errors.New(`invalid \p escape`)
		}
		name := string(t.src[t.pos+1 : end])
		if k := strings.IndexByte(name, '='); k >= 0 {
			name = name[k+1:]
		}
		t.pos = end + 1
		return nil, 0, `\` + string(c) + "{" + name + "}", nil
	case 'k':
		if t.peek(0) == '<' {
			return nil, 0, "", fmt.Errorf(`named back-reference \k<...> is %w`, errUnsupported)
		}
		return nil, 'k', "", nil
	}
	if c >= '1' && c <= '9' {
		return nil, 0, "", fmt.Errorf(`back-reference \%c is %w`, c, errUnsupported)
	}
	return nil, c, "", nil
}

func (t *jsTranslator) hex(n int) (rune, bool) {
	if t.pos+n > len(t.src) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(t.src[t.pos:t.pos+n]), 16, 32)
	if err != nil {
		return 0, false
	}
	t.pos += n
	return rune(v), true
}

// class reads [...] at t.pos into a set, folded and negated as JavaScript
// does.
func (t *jsTranslator) class() (runeSet, error) {
	t.pos++
	negate := false
	if t.peek(0) == '^' {
		negate = true
		t.pos++
	}
	item := func() (runeSet, rune, bool, error) {
		c := t.src[t.pos]
		if c != '\\' {
			t.pos++
			return nil, c, true, nil
		}
		s, l, special, err := t.escape(true)
		if err != nil {
			return nil, 0, false, err
		}
		if special != "" {
			return nil, 0, false, fmt.Errorf("%s inside a class is %w", special, errUnsupported)
		}
		if s != nil {
			return s, 0, false, nil
		}
		return nil, l, true, nil
	}
	var set runeSet
	for {
		if t.pos >= len(t.src) {
			return nil, errors.New("missing closing ]")
		}
		if t.src[t.pos] == ']' {
			t.pos++
			break
		}
		s1, l1, isLit1, err := item()
		if err != nil {
			return nil, err
		}
		if isLit1 && t.peek(0) == '-' && t.peek(1) != ']' && t.peek(1) != -1 {
			t.pos++
			s2, l2, isLit2, err := item()
			if err != nil {
				return nil, err
			}
			if isLit2 {
				if l2 < l1 {
					return nil, errors.New("range out of order in character class")
				}
				set = append(set, [2]rune{l1, l2})
				continue
			}
			// A class escape after '-' makes the '-' literal (non-unicode).
			set = append(set, [2]rune{l1, l1}, [2]rune{'-', '-'})
			set = append(set, s2...)
			continue
		}
		if isLit1 {
			set = append(set, [2]rune{l1, l1})
		} else {
			set = append(set, s1...)
		}
	}
	if t.fl.ignoreCase {
		set = set.fold(t.fl.unicode)
	}
	if negate {
		return set.complement(), nil
	}
	return set.normalize(), nil
}

// hasNestedRepetition ports the reference's conservative safe-regex check:
// a quantifier applied to something that already repeats, or an unbounded
// quantifier applied to an alternation whose branches differ in length, is
// rejected as a catastrophic-backtracking risk. RE2 would run such a pattern
// in linear time, but a config that the reference ignores as unsafe should
// not silently mean something different here.
func hasNestedRepetition(source string) bool {
	src := []rune(source)
	type tok = reTok
	var toks []tok
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inClass {
			if c == '\\' {
				i++
			} else if c == ']' {
				inClass = false
			}
			continue
		}
		switch c {
		case '\\':
			i++
			toks = append(toks, tok{kind: 's'})
			continue
		case '[':
			inClass = true
			toks = append(toks, tok{kind: 's'})
			continue
		case '(':
			toks = append(toks, tok{kind: '('})
			continue
		case ')':
			toks = append(toks, tok{kind: ')'})
			continue
		case '|':
			toks = append(toks, tok{kind: '|'})
			continue
		}
		if q, n, ok := readJSQuantifier(src, i); ok {
			toks = append(toks, q)
			i += n - 1
			continue
		}
		toks = append(toks, tok{kind: 's'})
	}

	type state struct {
		rep, ambiguous bool
		min, max       float64
	}
	type frame struct {
		last       *state
		rep, alt   bool
		bMin, bMax float64
		aMin, aMax float64
		haveAlt    bool
	}
	frames := []*frame{{}}
	emit := func(s *state) {
		f := frames[len(frames)-1]
		f.last = s
		if s.rep {
			f.rep = true
		}
		f.bMin += s.min
		f.bMax += s.max
	}
	record := func(f *frame) {
		if !f.haveAlt {
			f.aMin, f.aMax, f.haveAlt = f.bMin, f.bMax, true
			return
		}
		f.aMin = math.Min(f.aMin, f.bMin)
		f.aMax = math.Max(f.aMax, f.bMax)
	}
	for _, tk := range toks {
		switch tk.kind {
		case 's':
			emit(&state{min: 1, max: 1})
		case '(':
			frames = append(frames, &frame{})
		case ')':
			if len(frames) > 1 {
				f := frames[len(frames)-1]
				frames = frames[:len(frames)-1]
				if f.alt {
					record(f)
				}
				mn, mx := f.bMin, f.bMax
				if f.alt {
					mn, mx = f.aMin, f.aMax
				}
				emit(&state{rep: f.rep, ambiguous: f.alt && f.aMin != f.aMax, min: mn, max: mx})
			}
		case '|':
			f := frames[len(frames)-1]
			f.alt = true
			record(f)
			f.bMin, f.bMax, f.last = 0, 0, nil
		case 'q':
			f := frames[len(frames)-1]
			prev := f.last
			if prev == nil {
				continue
			}
			unbounded := math.IsInf(tk.max, 1)
			if prev.rep || (prev.ambiguous && unbounded) {
				return true
			}
			pMin, pMax := prev.min, prev.max
			prev.min *= tk.min
			if unbounded {
				prev.max = math.Inf(1)
			} else {
				prev.max = mulLen(prev.max, tk.max)
			}
			prev.rep = true
			f.rep = true
			f.bMin = f.bMin - pMin + prev.min
			if math.IsInf(f.bMax, 1) || math.IsInf(pMax, 1) {
				f.bMax = math.Inf(1)
			} else {
				f.bMax = f.bMax - pMax + prev.max
			}
		}
	}
	return false
}

func mulLen(l, f float64) float64 {
	if math.IsInf(l, 1) {
		if f == 0 {
			return 0
		}
		return l
	}
	return l * f
}

// reTok is a token of the safe-regex tokenizer: 's' simple, '(' open,
// ')' close, '|' alternation, 'q' quantifier (with its repeat bounds).
type reTok struct {
	kind     byte
	min, max float64
}

// readJSQuantifier reads *, +, ?, {n}, {n,} or {n,m} (optionally lazy) at i.
func readJSQuantifier(src []rune, i int) (q reTok, consumed int, ok bool) {
	q.kind = 'q'
	lazy := func(n int) int {
		if i+n < len(src) && src[i+n] == '?' {
			return n + 1
		}
		return n
	}
	switch src[i] {
	case '*':
		q.min, q.max = 0, math.Inf(1)
		return q, lazy(1), true
	case '+':
		q.min, q.max = 1, math.Inf(1)
		return q, lazy(1), true
	case '?':
		q.min, q.max = 0, 1
		return q, lazy(1), true
	case '{':
	default:
		return q, 0, false
	}
	j := i + 1
	st := j
	for j < len(src) && src[j] >= '0' && src[j] <= '9' {
		j++
	}
	if j == st {
		return q, 0, false
	}
	lo, _ := strconv.ParseFloat(string(src[st:j]), 64)
	hi := lo
	if j < len(src) && src[j] == ',' {
		j++
		ms := j
		for j < len(src) && src[j] >= '0' && src[j] <= '9' {
			j++
		}
		if j == ms {
			hi = math.Inf(1)
		} else {
			hi, _ = strconv.ParseFloat(string(src[ms:j]), 64)
		}
	}
	if j >= len(src) || src[j] != '}' {
		return q, 0, false
	}
	j++
	if j < len(src) && src[j] == '?' {
		j++
	}
	if hi < lo {
		return q, 0, false
	}
	q.min, q.max = lo, hi
	return q, j - i, true
}
