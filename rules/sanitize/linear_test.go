package sanitize

import (
	"strings"
	"testing"
)

const adversarialSize = 1 << 20

func repeatTo(unit string, n int) string {
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// adversarialInputs are 1 MiB strings aimed at every place where the
// reference's matching rescans: a quadratic scanner would take hours on them.
// No timing is asserted: the test only has to finish within go test's normal
// timeout, and the benchmarks report throughput.
func adversarialInputs() map[string]string {
	n := adversarialSize
	tail := strings.Repeat("z", n/2)
	return map[string]string{
		"tool_call openings":        repeatTo("<tool_call>", n),
		"tool_call truncated":       repeatTo("<tool_call ", n),
		"tool_call json payloads":   repeatTo(`<tool_call>{"a":"`, n),
		"tool_call quoted attrs":    repeatTo(`<tool_call a="`, n),
		"tool_call merged quotes":   `<tool_call "` + repeatTo(`<tool_call \"`, n/2) + tail,
		"tool_call mixed quotes":    repeatTo(`<tool_call "'<tool_call '\`, n),
		"tool_call attr chain":      "<tool_call>" + repeatTo(` a="<tool_call>" b='<tool_call>'`, n),
		"tool_call closes in block": `<tool_call>{"x":"` + repeatTo("</tool_call>", n),
		"tool_result closes":        "<tool_result>[" + repeatTo("</tool_call></tool_result>", n),
		"think openings":            repeatTo("<think>", n),
		"think alternating":         repeatTo("<think></think>", n),
		"think unterminated":        repeatTo("<think ", n),
		"final tags":                repeatTo("<final>", n),
		"antml prefixes":            repeatTo("<", n),
		"special token openers":     repeatTo("<|", n),
		"special token bodies":      repeatTo("<|a", n),
		"full-width openers":        repeatTo("<｜", n),
		"special tokens":            repeatTo("a<|x|>", n),
		"backticks":                 repeatTo("`", n),
		"backtick pairs":            repeatTo("`a", n),
		"backtick tail":             "`" + repeatTo("a", n),
		"fences":                    repeatTo("```\n", n),
		"tilde fences":              repeatTo("\n~~~", n),
		"tokens in code":            "```\n" + repeatTo("<|x|><think>", n),
		"memories":                  repeatTo("<relevant-memories>", n),
		"memories unterminated":     repeatTo("<relevant_memories ", n),
		"tool call markers":         repeatTo("[Tool Call:", n),
		"tool call markers closed":  repeatTo("[Tool Call: x]", n),
		"tool call unbalanced args": repeatTo("[Tool Call: x] Arguments: {", n),
		"tool call merged args":     repeatTo(`[Tool Call: x] Arguments: {"\"`, n),
		"tool call string args":     repeatTo(`[Tool Call: x] Arguments: "`, n),
		"tool call escaped args":    repeatTo(`[Tool Call: x] Arguments: "\"`, n),
		"tool call line args":       repeatTo("[Tool Call: x] Arguments: a ", n),
		"tool result markers":       repeatTo("[Tool Result for ID", n),
		"tool result blocks":        repeatTo("[Tool Result for ID x]\n", n),
		"historical markers":        repeatTo("[Historical context:", n),
		"minimax invokes":           "minimax:tool_call" + repeatTo("<invoke>", n),
		"minimax invokes unclosed":  "minimax:tool_call" + repeatTo("<invoke x", n),
		"minimax markers":           repeatTo("</minimax:tool_call>", n),
		"spaces after lt":           "<" + repeatTo(" ", n),
		"lt runs":                   repeatTo("<", n),
		"redact keys":               repeatTo("KEY=", n),
		"redact key values":         repeatTo("A_KEY=x ", n),
		"redact bearer":             repeatTo("Bearer ", n),
		"redact pem openings":       repeatTo("-----BEGIN PRIVATE KEY-----", n),
		"redact digits":             repeatTo("1234567:", n),
		"redact cli flags":          repeatTo("--token ", n),
		"redact query":              repeatTo("?token=", n),
		"redact json":               repeatTo(`"token":"`, n),
		"astral text":               repeatTo("😀<", n),
	}
}

func TestAdversarialInputsFinish(t *testing.T) {
	r := DefaultRedactor()
	for name, in := range adversarialInputs() {
		t.Run(name, func(t *testing.T) {
			for _, p := range []Profile{Delivery, History, InternalScaffolding} {
				if out := VisibleText(in, p); len(out) > len(in) {
					t.Fatalf("profile %d grew the text", p)
				}
			}
			r.ToolPayload(in)
		})
	}
}
