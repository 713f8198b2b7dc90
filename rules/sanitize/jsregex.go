package sanitize

import (
	"errors"
	"fmt"
	"regexp"
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
		return t.unicodeEscape()
	case 'p', 'P':
		if !t.fl.unicode {
			return nil, c, "", nil
		}
		special, err := t.propertyEscape(c)
		return nil, 0, special, err
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

// unicodeEscape reads what follows \u at t.pos: \u{...} in unicode mode,
// else four hex digits, a surrogate pair of two such escapes combined into
// one character; anything else is a literal 'u'.
func (t *jsTranslator) unicodeEscape() (set runeSet, lit rune, special string, err error) {
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
}

// propertyEscape reads the {Name} or {Key=Value} after \p or \P (c) at
// t.pos, in unicode mode, as RE2's \p{Value} (or \P{Value}).
func (t *jsTranslator) propertyEscape(c rune) (string, error) {
	if t.peek(0) != '{' {
		return "", errors.New(`invalid \p escape`)
	}
	end := t.pos + 1
	for end < len(t.src) && t.src[end] != '}' {
		end++
	}
	if end >= len(t.src) {
		return "", errors.New(`invalid \p escape`)
	}
	name := string(t.src[t.pos+1 : end])
	if k := strings.IndexByte(name, '='); k >= 0 {
		name = name[k+1:]
	}
	t.pos = end + 1
	return `\` + string(c) + "{" + name + "}", nil
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
