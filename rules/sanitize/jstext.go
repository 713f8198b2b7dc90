package sanitize

import (
	"strings"
	"unicode/utf8"
)

// isJSSpaceRune reports whether r is matched by JavaScript's \s and removed by
// String.prototype.trim (WhiteSpace plus LineTerminator). Go's \s and
// strings.TrimSpace use different sets, and the reference's trims and tag
// grammars are defined by the JavaScript one.
func isJSSpaceRune(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0D, r == 0x20:
		return true
	case r < 0x80:
		return false
	case r == 0xA0, r == 0x1680, r >= 0x2000 && r <= 0x200A,
		r == 0x2028, r == 0x2029, r == 0x202F, r == 0x205F, r == 0x3000, r == 0xFEFF:
		return true
	}
	return false
}

// jsSpaceWidth returns the byte width of the JavaScript whitespace character at
// s[i], or 0 when s[i] does not start one.
func jsSpaceWidth(s string, i int) int {
	c := s[i]
	if c < utf8.RuneSelf {
		if c == ' ' || (c >= 0x09 && c <= 0x0D) {
			return 1
		}
		return 0
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if isJSSpaceRune(r) {
		return w
	}
	return 0
}

// skipJSSpace returns the first index at or after i that is not JavaScript
// whitespace.
func skipJSSpace(s string, i int) int {
	for i < len(s) {
		w := jsSpaceWidth(s, i)
		if w == 0 {
			break
		}
		i += w
	}
	return i
}

// isJSSpaceBefore reports whether the character ending at byte i is JavaScript
// whitespace; i must be > 0.
func isJSSpaceBefore(s string, i int) bool {
	if c := s[i-1]; c < utf8.RuneSelf {
		return c == ' ' || (c >= 0x09 && c <= 0x0D)
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return isJSSpaceRune(r)
}

// trimStartJS and trimJS are String.prototype.trimStart / trim.
func trimStartJS(s string) string {
	return s[skipJSSpace(s, 0):]
}

func trimEndJS(s string) string {
	end := len(s)
	for end > 0 && isJSSpaceBefore(s, end) {
		_, w := utf8.DecodeLastRuneInString(s[:end])
		end -= w
	}
	return s[:end]
}

func trimJS(s string) string {
	return trimEndJS(trimStartJS(s))
}

// isWordByte is JavaScript's \w (and so the \b boundary), which is ASCII-only
// for regular expressions without the u flag.
func isWordByte(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// hasPrefixFold reports whether s[i:] starts with lower, comparing ASCII
// letters case-insensitively. lower must be lower-case ASCII. JavaScript's i
// flag (without u) never folds a non-ASCII character onto an ASCII one, so
// an ASCII-only comparison is exact for the ASCII keywords used here.
func hasPrefixFold(s string, i int, lower string) bool {
	if len(s)-i < len(lower) {
		return false
	}
	for k := 0; k < len(lower); k++ {
		if lowerASCII(s[i+k]) != lower[k] {
			return false
		}
	}
	return true
}

// indexFold returns the first index >= from where lower occurs in s, ASCII
// case-insensitively, or -1. lower must be non-empty lower-case ASCII.
func indexFold(s string, from int, lower string) int {
	first := lower[0]
	alt := first
	if first >= 'a' && first <= 'z' {
		alt = first - ('a' - 'A')
	}
	last := len(s) - len(lower)
	// Next occurrences of each case of the first byte, cached so that every
	// byte is searched at most once per case (-2: not searched yet, -1: none).
	nf, na := -2, -2
	if alt == first {
		na = -1
	}
	for i := from; i <= last; {
		if nf != -1 && nf < i {
			nf = indexByteFrom(s, i, first)
		}
		if na != -1 && na < i {
			na = indexByteFrom(s, i, alt)
		}
		j := nf
		if j < 0 || (na >= 0 && na < j) {
			j = na
		}
		if j < 0 || j > last {
			return -1
		}
		if hasPrefixFold(s, j, lower) {
			return j
		}
		i = j + 1
	}
	return -1
}

// wordRunEnd returns the end of the run of \w characters starting at i.
func wordRunEnd(s string, i int) int {
	for i < len(s) && isWordByte(s[i]) {
		i++
	}
	return i
}

// equalFoldASCII compares s to lower (lower-case ASCII) case-insensitively.
func equalFoldASCII(s, lower string) bool {
	return len(s) == len(lower) && hasPrefixFold(s, 0, lower)
}

func indexByteFrom(s string, from int, c byte) int {
	if from >= len(s) {
		return -1
	}
	j := strings.IndexByte(s[from:], c)
	if j < 0 {
		return -1
	}
	return from + j
}
