package sanitize

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

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
