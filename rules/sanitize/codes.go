package sanitize

import (
	"sort"
	"strings"
)

// Code regions protect literal examples: tags, tokens and scaffolding markers
// inside them are never stripped. The rules reproduce the reference's two
// regular expressions exactly, quirks included:
//
//	fenced: /(^|\n)(```|~~~)[^\n]*\n[\s\S]*?(?:\n\2(?:\n|$)|$)/g
//	inline: /`+[^`]+`+/g   (kept unless it lies wholly inside a fenced block)
//
// So a fence must start a line and its opening line must end with a newline; a
// block runs to the first line that is exactly the same three-character fence
// (or to the end of the text). Because a match consumes the newline after its
// closing fence, a second fence that starts on the very next line is not seen
// as an opening fence; V8 behaves the same way.

type region struct{ start, end int }

// codeRegions is sorted by start; maxEnd[i] is the largest end among the
// first i+1 regions, so containment and overlap queries are one binary search
// even though an inline span may overlap a fenced block.
type codeRegions struct {
	rs     []region
	maxEnd []int
}

func findCodeRegions(s string) codeRegions {
	if strings.IndexByte(s, '`') < 0 && !strings.Contains(s, "~~~") {
		return codeRegions{}
	}
	fenced := findFencedRegions(s)
	inline := findInlineRegions(s, fenced)
	all := make([]region, 0, len(fenced)+len(inline))
	all = append(all, fenced...)
	all = append(all, inline...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].start < all[j].start })
	maxEnd := make([]int, len(all))
	m := 0
	for i, r := range all {
		if r.end > m {
			m = r.end
		}
		maxEnd[i] = m
	}
	return codeRegions{rs: all, maxEnd: maxEnd}
}

func findFencedRegions(s string) []region {
	var out []region
	// Candidates in the order the regex tries them: position 0 (via ^, only
	// while the search has not moved), then the character after every '\n'
	// that lies at or after the current search position.
	atZero, nextNL := true, 0
	for {
		p := 0
		if atZero {
			atZero = false
		} else {
			nl := indexByteFrom(s, nextNL, '\n')
			if nl < 0 {
				break
			}
			p, nextNL = nl+1, nl+1
		}
		fence := ""
		if strings.HasPrefix(s[p:], "```") {
			fence = "```"
		} else if strings.HasPrefix(s[p:], "~~~") {
			fence = "~~~"
		} else {
			continue
		}
		nl := indexByteFrom(s, p+3, '\n')
		if nl < 0 {
			// Every later candidate also lacks the newline its opening line
			// needs, so nothing further can match.
			break
		}
		end := len(s)
		closing := "\n" + fence
		for from := nl + 1; ; {
			k := strings.Index(s[from:], closing)
			if k < 0 {
				break
			}
			after := from + k + len(closing)
			if after == len(s) {
				end = after
				break
			}
			if s[after] == '\n' {
				end = after + 1
				break
			}
			from += k + 1
		}
		out = append(out, region{p, end})
		nextNL = end
	}
	return out
}

func findInlineRegions(s string, fenced []region) []region {
	var out []region
	pos := 0
	for {
		i := indexByteFrom(s, pos, '`')
		if i < 0 {
			break
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j >= len(s) {
			break
		}
		k := indexByteFrom(s, j, '`')
		if k < 0 {
			// No closing run exists for this or any later opening run.
			break
		}
		e := k
		for e < len(s) && s[e] == '`' {
			e++
		}
		if !insideAny(fenced, i, e) {
			out = append(out, region{i, e})
		}
		pos = e
	}
	return out
}

// insideAny reports whether [start,end) lies within one of the sorted,
// disjoint regions.
func insideAny(rs []region, start, end int) bool {
	k := sort.Search(len(rs), func(i int) bool { return rs[i].start > start }) - 1
	return k >= 0 && end <= rs[k].end
}

// contains reports whether pos lies inside some code region.
func (c codeRegions) contains(pos int) bool {
	if len(c.rs) == 0 {
		return false
	}
	k := sort.Search(len(c.rs), func(i int) bool { return c.rs[i].start > pos }) - 1
	return k >= 0 && c.maxEnd[k] > pos
}

// overlaps reports whether [start,end) intersects some code region.
func (c codeRegions) overlaps(start, end int) bool {
	if len(c.rs) == 0 {
		return false
	}
	k := sort.Search(len(c.rs), func(i int) bool { return c.rs[i].start >= end }) - 1
	return k >= 0 && c.maxEnd[k] > start
}
