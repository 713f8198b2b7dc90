package sanitize

import "unicode/utf8"

// The reference measures text with JavaScript's String.length, i.e. in UTF-16
// code units: a code point above U+FFFF (an emoji, say) counts as two. These
// helpers reproduce that count on Go's UTF-8 strings. A byte that is not valid
// UTF-8 decodes as U+FFFD and counts as one unit; it is kept, never rewritten.
//
// Where the reference slices a string at a unit offset that falls between the
// two halves of a surrogate pair, these helpers never split the character:
// a prefix stops before it and a suffix starts after it.

// charUnits returns the UTF-16 length and the UTF-8 width of the character
// starting at byte i of s.
func charUnits(s string, i int) (units, width int) {
	if s[i] < utf8.RuneSelf {
		return 1, 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r >= 0x10000 {
		return 2, w
	}
	return 1, w
}

// utf16Len returns the length of s in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		// ASCII runs, eight bytes at a time.
		for i+8 <= len(s) && (s[i]|s[i+1]|s[i+2]|s[i+3]|s[i+4]|s[i+5]|s[i+6]|s[i+7])&0x80 == 0 {
			n += 8
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		u, w := charUnits(s, i)
		n += u
		i += w
	}
	return n
}

// utf16PrefixEnd returns the byte length of the longest prefix of s that is
// at most max UTF-16 units long and does not end inside a character.
func utf16PrefixEnd(s string, max int) int {
	if max <= 0 {
		return 0
	}
	n := 0
	for i := 0; i < len(s); {
		units, w := charUnits(s, i)
		if n+units > max {
			return i
		}
		n += units
		i += w
	}
	return len(s)
}

// utf16SuffixStart returns the byte offset where the longest suffix of s that
// is at most max UTF-16 units long begins.
func utf16SuffixStart(s string, max int) int {
	if max <= 0 {
		return len(s)
	}
	n := 0
	i := len(s)
	for i > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:i])
		units := 1
		if r >= 0x10000 {
			units = 2
		}
		if n+units > max {
			return i
		}
		n += units
		i -= w
	}
	return 0
}

// utf16Chunks splits s at every size-th UTF-16 unit, the grid the reference's
// text.slice(index, index + size) produces. A boundary that would split a
// surrogate pair moves back one unit so the character stays whole in the later
// chunk; the grid itself does not shift.
func utf16Chunks(s string, size int) []string {
	b := utf16ChunkBounds(s, size)
	out := make([]string, 0, len(b)-1)
	for i := 1; i < len(b); i++ {
		out = append(out, s[b[i-1]:b[i]])
	}
	return out
}

// utf16ChunkBounds returns the byte offsets of those chunks, starting with 0
// and ending with len(s).
func utf16ChunkBounds(s string, size int) []int {
	out := []int{0}
	n, next := 0, size
	for i := 0; i < len(s); {
		units, w := charUnits(s, i)
		if n+units > next {
			if i > out[len(out)-1] {
				out = append(out, i)
			}
			next += size
		}
		n += units
		i += w
		if n == next {
			out = append(out, i)
			next += size
		}
	}
	if out[len(out)-1] < len(s) {
		out = append(out, len(s))
	}
	return out
}
