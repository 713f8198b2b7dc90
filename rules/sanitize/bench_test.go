package sanitize

import (
	"strings"
	"testing"
)

// mixedText is realistic assistant/tool text: prose, code fences, tool-call
// XML, thinking tags, special tokens, downgraded scaffolding and a few
// secrets, repeated to size bytes.
func mixedText(size int) string {
	parts := []string{
		"Here is what I found after looking at the repository layout and the failing test.\n",
		"The handler reads the session entry, checks visibility and then pages the transcript.\n\n",
		"```go\nfunc main() {\n\tfmt.Println(\"<think>not a tag</think>\")\n}\n```\n\n",
		"<think>I should check the config first, then the logs.</think>",
		"Let me check.\n<tool_call>{\"name\":\"read\",\"arguments\":{\"path\":\"/tmp/x\"}}</tool_call>\n",
		"Use `<tool_call>` only in examples. ",
		"<|assistant|>The deploy used OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123 by mistake.\n",
		"[Tool Call: exec (ID: toolu_9)]\nArguments: {\"cmd\":\"ls -la\"}\n",
		"<relevant-memories>\n- user prefers short answers\n</relevant-memories>\n",
		"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abcdefghijklmnop\n",
		"Results are in https://example.test/report?page=2&signature=abcdefghijklmnopqrstuv#top\n",
		"All done — 3 files changed, 42 insertions(+), 7 deletions(-). 😀\n\n",
	}
	var b strings.Builder
	for b.Len() < size {
		for _, p := range parts {
			b.WriteString(p)
		}
	}
	return b.String()[:size]
}

func BenchmarkSanitizeRedact80KiB(b *testing.B) {
	in := mixedText(80 * 1024)
	r := DefaultRedactor()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.ToolPayload(VisibleText(in, History))
	}
}

func BenchmarkVisibleText80KiB(b *testing.B) {
	in := mixedText(80 * 1024)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		VisibleText(in, History)
	}
}

func BenchmarkRedact80KiB(b *testing.B) {
	in := mixedText(80 * 1024)
	r := DefaultRedactor()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r.ToolPayload(in)
	}
}

func BenchmarkAdversarialToolCall1MiB(b *testing.B) {
	in := repeatTo("<tool_call>", adversarialSize)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		VisibleText(in, History)
	}
}

// BenchmarkAdversarial runs every adversarial input through the history
// sanitizer and the tool-payload redactor; comparing -benchtime runs at
// different sizes shows the scaling.
func BenchmarkAdversarial(b *testing.B) {
	r := DefaultRedactor()
	for name, in := range adversarialInputs() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				r.ToolPayload(VisibleText(in, History))
			}
		})
	}
}
