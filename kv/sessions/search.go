package sessions

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Search is sessions_list's `search`: a case-insensitive substring of the
// display name, label, subject, sessionId or key, as in OpenClaw. Case is
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

// A trigram is three consecutive bytes of a lower-cased searched field (or
// of a needle), packed. A needle can be a substring of a field only if the
// field has each of the needle's trigrams, so the sessions holding all of
// them are the only candidates the exact check needs to look at. Bytes, not
// runes: a lower-cased needle's UTF-8 is a byte substring of a lower-cased
// field's exactly when it is a substring of it.
//
// Beside them, every run of four digits is filed as a digit quad. Ten
// digits make only a thousand trigrams, so in ids, phone numbers and
// counters each digit trigram is in about one session of every hundred and
// fifty at any store size (at a million sessions, the shortest list of a
// needle such as "task 999989" held ~6,600 slots, against ~550 at 100k);
// a quad is ten times rarer, and a needle with four digits in a row is
// narrowed by it. A quad costs a session a posting for each such run
// (about fifteen in sessions.Sample's shapes, beside ~70 trigrams).
type trigram uint32

func tri(a, b, c byte) trigram { return trigram(a)<<16 | trigram(b)<<8 | trigram(c) }

// quadTag marks a digit quad: tag<<24 | its four digits as a number, above
// every trigram (24 bits).
const quadTag = 1

// appendQuads appends a digit quad for each four digits in a row in f.
func appendQuads(dst []trigram, f string) []trigram {
	run, v := 0, 0
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c < '0' || c > '9' {
			run, v = 0, 0
			continue
		}
		run++
		v = v%1000*10 + int(c-'0')
		if run >= 4 {
			dst = append(dst, quadTag<<24|trigram(v))
		}
	}
	return dst
}

// appendTrigrams appends f's trigrams and digit quads, f lower-cased as MatchesSearch
// lowers it (duplicates and all: the caller sorts and compacts).
func appendTrigrams(dst []trigram, f string) []trigram {
	if !isASCII(f) {
		// lowered first: lowering can lengthen a field ("Ⱥ", two bytes,
		// lowers to "ⱥ", three), so a short one may still have a trigram
		f = strings.ToLower(f)
		for i := 0; i+3 <= len(f); i++ {
			dst = append(dst, tri(f[i], f[i+1], f[i+2]))
		}
		return appendQuads(dst, f)
	}
	for i := 0; i+3 <= len(f); i++ {
		dst = append(dst, tri(lowerASCII(f[i]), lowerASCII(f[i+1]), lowerASCII(f[i+2])))
	}
	return appendQuads(dst, f) // lowering leaves digits as they are
}

// appendEntryTrigrams appends the trigrams of e's searched fields,
// duplicates and all.
func appendEntryTrigrams(dst []trigram, e *Entry) []trigram {
	for _, f := range e.searchFields() {
		dst = appendTrigrams(dst, f)
	}
	return dst
}

// entryTrigrams is the sorted set of the trigrams of e's searched fields.
func entryTrigrams(e *Entry) []trigram {
	n := 0
	for _, f := range e.searchFields() {
		n += len(f)
	}
	g := appendEntryTrigrams(make([]trigram, 0, n), e)
	if len(g) == 0 {
		return nil
	}
	slices.Sort(g)
	return slices.Clip(slices.Compact(g))
}

// needleTrigrams is the sorted set of needle's (a SearchNeedle's)
// trigrams and digit quads; ok is false for a needle shorter than a
// trigram, which every session may match.
func needleTrigrams(needle string) (g []trigram, ok bool) {
	for i := 0; i+3 <= len(needle); i++ {
		g = append(g, tri(needle[i], needle[i+1], needle[i+2]))
	}
	g = appendQuads(g, needle)
	slices.Sort(g)
	return slices.Compact(g), len(needle) >= 3
}

// sameSearchText reports whether a and b have the same searched fields,
// so an update that leaves them alone (most do: a turn moves updatedAt and
// the token counts) touches no posting list.
func sameSearchText(a, b *Entry) bool { return a.searchFields() == b.searchFields() }
