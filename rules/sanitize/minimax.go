package sanitize

import "strings"

// MiniMax sometimes writes its tool invocations into the text as XML. Only
// when the text mentions minimax:tool_call (case-insensitive) are
// /<invoke\b[^>]*>[\s\S]*?<\/invoke>/gi blocks and /<\/?minimax:tool_call>/gi
// markers removed.

func stripMinimaxToolCallXML(s string) string {
	if indexFold(s, 0, "minimax:tool_call") < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := 0; ; {
		lt := indexFold(s, i, "<invoke")
		if lt < 0 {
			break
		}
		after := lt + len("<invoke")
		if after < len(s) && isWordByte(s[after]) {
			i = lt + 1
			continue
		}
		gt := indexByteFrom(s, after, '>')
		if gt < 0 {
			break // no later <invoke can reach a '>' either
		}
		cl := indexFold(s, gt+1, "</invoke>")
		if cl < 0 {
			break // no later <invoke can find a closing tag either
		}
		b.WriteString(s[last:lt])
		last = cl + len("</invoke>")
		i = last
	}
	b.WriteString(s[last:])
	cleaned := b.String()

	b.Reset()
	b.Grow(len(cleaned))
	last = 0
	for i := 0; ; {
		lt := indexByteFrom(cleaned, i, '<')
		if lt < 0 {
			break
		}
		j := lt + 1
		if j < len(cleaned) && cleaned[j] == '/' {
			j++
		}
		if hasPrefixFold(cleaned, j, "minimax:tool_call>") {
			b.WriteString(cleaned[last:lt])
			last = j + len("minimax:tool_call>")
			i = last
			continue
		}
		i = lt + 1
	}
	b.WriteString(cleaned[last:])
	return b.String()
}
