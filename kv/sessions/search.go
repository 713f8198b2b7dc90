package sessions

import (
	"math/bits"
	"strings"
	"unicode/utf8"
)

// Search is sessions_list's `search`: a case-insensitive substring of the
// display name, label, subject, sessionId or key (docs/tools.md). Case is
// folded as strings.ToLower folds it, on the needle and on every field.

// SearchNeedle is the form of a search string that MatchesSearch takes.
func SearchNeedle(s string) string { return strings.ToLower(s) }

// searchFields are the fields `search` matches, in OpenClaw's order.
func (e *Entry) searchFields() [5]string {
	return [5]string{e.DisplayName, e.Label, e.Subject, e.SessionID, e.Key}
}

// MatchesSearch reports whether needle (a SearchNeedle) is a substring of one
// of the searched fields, each lower-cased.
func (e *Entry) MatchesSearch(needle string) bool {
	for _, f := range e.searchFields() {
		if f != "" && containsLower(f, needle) {
			return true
		}
	}
	return false
}

// containsLower is strings.Contains(strings.ToLower(f), needle) without the
// copy when f is ASCII (ToLower of ASCII is ASCII, byte for byte).
func containsLower(f, needle string) bool {
	if !isASCII(f) {
		return strings.Contains(strings.ToLower(f), needle)
	}
	n := len(needle)
	if n == 0 {
		return true
	}
	first := needle[0]
	for i := 0; i+n <= len(f); i++ {
		if lowerASCII(f[i]) != first {
			continue
		}
		j := 1
		for j < n && lowerASCII(f[i+j]) == needle[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// A search signature is a superimposed code of every byte trigram of the
// lower-cased searched fields: trigram t sets bit sigPos(t). A needle can be
// a substring of a field only if the field has each of its trigrams, so a
// session whose signature lacks one of the needle's bits cannot match.
// 256 bits per session: with the ~85 trigrams of a typical entry a quarter
// of the bits are set, so a needle of n trigrams lets through about 0.28^n of
// the sessions that do not match, all of which the exact check then drops.
const sigBits = 256

type signature [sigBits / 64]uint64

func sigPos(a, b, c byte) uint {
	return uint((uint32(a)|uint32(b)<<8|uint32(c)<<16)*0x9E3779B1) >> 24
}

func entrySignature(e *Entry) signature {
	var s signature
	for _, f := range e.searchFields() {
		s.add(f)
	}
	return s
}

// add sets the bits of f's trigrams, f lower-cased as MatchesSearch does.
func (s *signature) add(f string) {
	if len(f) < 3 {
		return
	}
	if !isASCII(f) {
		f = strings.ToLower(f)
		for i := 0; i+3 <= len(f); i++ {
			p := sigPos(f[i], f[i+1], f[i+2])
			s[p>>6] |= 1 << (p & 63)
		}
		return
	}
	for i := 0; i+3 <= len(f); i++ {
		p := sigPos(lowerASCII(f[i]), lowerASCII(f[i+1]), lowerASCII(f[i+2]))
		s[p>>6] |= 1 << (p & 63)
	}
}

// needleSignature is the signature every match of needle has; ok is false
// for a needle shorter than a trigram, which every session may match.
func needleSignature(needle string) (s signature, ok bool) {
	for i := 0; i+3 <= len(needle); i++ {
		p := sigPos(needle[i], needle[i+1], needle[i+2])
		s[p>>6] |= 1 << (p & 63)
	}
	return s, len(needle) >= 3
}

func (s *signature) each(fn func(p uint)) {
	for w, word := range s {
		for word != 0 {
			fn(uint(w*64 + bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
}

// signatures holds every slot's signature bit-sliced: column p is a bitmap
// over slots of the sessions whose signature has bit p, so the candidates
// of a needle are the AND of its bits' columns, a few words per 64 sessions.
type signatures struct {
	cols [sigBits][]uint64
}

// grow makes room for slot numbers below n.
func (x *signatures) grow(n int) {
	words := (n + 63) / 64
	for p := range x.cols {
		if len(x.cols[p]) < words {
			x.cols[p] = append(x.cols[p], make([]uint64, words-len(x.cols[p]))...)
		}
	}
}

// set turns slot's bits in s on or off.
func (x *signatures) set(slot uint32, s signature, on bool) {
	w, bit := slot>>6, uint64(1)<<(slot&63)
	s.each(func(p uint) {
		if on {
			x.cols[p][w] |= bit
		} else {
			x.cols[p][w] &^= bit
		}
	})
}

// candidates returns the bitmap of slots whose signature has every bit of q.
func (x *signatures) candidates(q signature) []uint64 {
	var out []uint64
	q.each(func(p uint) {
		if out == nil {
			out = append([]uint64(nil), x.cols[p]...)
			return
		}
		col := x.cols[p]
		for i := range out {
			out[i] &= col[i]
		}
	})
	return out
}
