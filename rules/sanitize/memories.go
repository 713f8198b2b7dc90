package sanitize

import "strings"

// <relevant-memories> / <relevant_memories> blocks are injected recall
// scaffolding, never part of the answer. Tags follow
// /<\s*(\/?)\s*relevant[-_]memories\b[^<>]*>/gi; everything from an opening
// tag to the next closing tag goes, an unclosed block hides the rest of the
// text, a stray closing tag is dropped, and tags inside code are ignored.

// parseSimpleTag parses "<", whitespace, an optional "/", whitespace, then
// lets name report where a matching name ends (or -1), then [^<>]* and ">".
// It returns the end of the tag and whether it was a closing tag.
func parseSimpleTag(s string, lt int, name func(s string, i int) int) (end int, isClose, ok bool) {
	i := skipJSSpace(s, lt+1)
	if i < len(s) && s[i] == '/' {
		isClose = true
		i = skipJSSpace(s, i+1)
	}
	i = name(s, i)
	if i < 0 {
		return 0, false, false
	}
	for ; i < len(s); i++ {
		switch s[i] {
		case '>':
			return i + 1, isClose, true
		case '<':
			return 0, false, false
		}
	}
	return 0, false, false
}

func memoriesName(s string, i int) int {
	if !hasPrefixFold(s, i, "relevant") {
		return -1
	}
	i += len("relevant")
	if i >= len(s) || (s[i] != '-' && s[i] != '_') {
		return -1
	}
	e := wordRunEnd(s, i+1)
	if !equalFoldASCII(s[i+1:e], "memories") {
		return -1
	}
	return e
}

// stripBlocks removes tag-delimited blocks found by name, skipping tags that
// start inside code. With keepUnclosed the text after an unclosed opening tag
// survives (the reasoning stage's preserve mode).
func stripBlocks(s string, name func(string, int) int, regions codeRegions, keepUnclosed bool) string {
	var b strings.Builder
	last, inBlock, changed := 0, false, false
	for i := 0; ; {
		lt := indexByteFrom(s, i, '<')
		if lt < 0 {
			break
		}
		end, isClose, ok := parseSimpleTag(s, lt, name)
		if !ok || regions.contains(lt) {
			i = lt + 1
			continue
		}
		if !changed {
			b.Grow(len(s))
			changed = true
		}
		if !inBlock {
			b.WriteString(s[last:lt])
			if !isClose {
				inBlock = true
			}
		} else if isClose {
			inBlock = false
		}
		last = end
		i = end
	}
	if !changed {
		return s
	}
	if !inBlock || keepUnclosed {
		b.WriteString(s[last:])
	}
	return b.String()
}

func stripRelevantMemories(s string) string {
	if !strings.Contains(s, "<") || indexFold(s, 0, "relevant") < 0 {
		return s
	}
	return stripBlocks(s, memoriesName, findCodeRegions(s), false)
}
