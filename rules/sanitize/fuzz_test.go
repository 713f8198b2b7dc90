package sanitize

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"", "plain text", "<thinking>\nsecret\n</thinking>\nVisible",
	"Let me check.\n\n<tool_call> {\"name\": \"read\"} </tool_call> after",
	"prefix\n<tool_call><function=read><parameter=path>/x</parameter></function></tool_call>\nsuffix",
	"Use <tool_call name=\"find\" to invoke tools.", "prefix <tool_call/> suffix </tool_result>",
	"<|assistant|>Here<|end|>", "<｜begin▁of▁sentence｜>Hi", "Before <|token `code|>` after",
	"```\n<think>x</think>\n```\n<think>y</think>z", "`a\n```\nb` c\n```",
	"Hello\n<relevant-memories>\ninternal", "[Tool Call: read (ID: t1)]\nArguments: {\"p\":\"x\"}\nok",
	"[Tool Result for ID t1]\nout\n[Tool Call: y]", "[Historical context: x]\nVisible",
	"<invoke name=\"x\">y</invoke></minimax:tool_call>", "<final>A</final><antthinking>b",
	"<tool_call>{\"a\":\"</tool_call>\"}</tool_call>x", "<tool_call \"\\\"<tool_call>",
	"OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz", "-----BEGIN RSA PRIVATE KEY-----\na\nb\n-----END RSA PRIVATE KEY-----",
	"Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "bot123456:ABCDEFGHIJKLMNOPQRST", "?token=abc&x=1",
	"😀\xff\u2028\u00a0", "0<||>00", "{\"token\":\"😀😀😀😀😀😀😀😀😀\"}",
}

// isEditOf reports whether out can be made from in by deleting characters
// and inserting spaces, the only edits VisibleText makes: with spaces
// ignored, out must be a subsequence of in.
func isEditOf(out, in string) bool {
	out = strings.ReplaceAll(out, " ", "")
	in = strings.ReplaceAll(in, " ", "")
	j := 0
	for i := 0; i < len(out); i++ {
		for j < len(in) && in[j] != out[i] {
			j++
		}
		if j == len(in) {
			return false
		}
		j++
	}
	return true
}

func FuzzVisibleText(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		outs := map[Profile]string{}
		for _, p := range []Profile{Delivery, History, InternalScaffolding} {
			out := VisibleText(s, p)
			outs[p] = out
			if len(out) > len(s) {
				t.Fatalf("profile %d grew %q to %q", p, s, out)
			}
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Fatalf("profile %d produced invalid UTF-8 from %q", p, s)
			}
			if !isEditOf(out, s) {
				t.Fatalf("profile %d output %q is not a deletion of %q", p, out, s)
			}
		}
		// Without '<' or '[' no stage has anything to act on: only trims apply.
		if !strings.ContainsAny(s, "<[") {
			if outs[History] != s || outs[Delivery] != trimJS(s) || outs[InternalScaffolding] != trimStartJS(s) {
				t.Fatalf("text without markup changed: %q -> %v", s, outs)
			}
		}
		// The linear scanners must agree with the reference's quadratic loops.
		if len(s) <= 4096 {
			if got, want := stripToolCallXML(s), naiveStripToolCallXML(s); got != want {
				t.Fatalf("tool XML on %q:\n got %q\nwant %q", s, got, want)
			}
			if got, want := stripDowngradedToolCalls(s), naiveStripDowngradedCalls(s); got != want {
				t.Fatalf("tool calls on %q:\n got %q\nwant %q", s, got, want)
			}
			if got, want := stripToolResultBlocks(s), naiveStripToolResults(s); got != want {
				t.Fatalf("tool results on %q:\n got %q\nwant %q", s, got, want)
			}
			got, want := findCodeRegions(s).rs, regexCodeRegions(s)
			if len(got) != len(want) {
				t.Fatalf("code regions on %q: %v vs %v", s, got, want)
			}
		}
	})
}

func FuzzRedact(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	secret := "ghp_" + strings.Repeat("Q", 36)
	off, _ := NewRedactor("off", nil)
	f.Fuzz(func(t *testing.T, s string) {
		r := DefaultRedactor()
		out, changed := r.ToolPayload(s)
		if changed != (out != s) {
			t.Fatalf("changed=%v for %q -> %q", changed, s, out)
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q: %q", s, out)
		}
		if got := r.ErrorText(s); got != out {
			t.Fatalf("ErrorText and ToolPayload differ: %q vs %q", got, out)
		}
		if off.Log(s) != s {
			t.Fatal("off must not redact logs")
		}
		if got, _ := off.ToolPayload(s); got != out {
			t.Fatal("off must not change tool payload redaction")
		}
		planted := s + " " + secret + " "
		if utf16Len(planted) <= redactChunkThreshold {
			if got, _ := r.ToolPayload(planted); strings.Contains(got, secret) {
				t.Fatalf("planted secret survived in %q", got)
			}
		}
		// The anchored fast path must find exactly what a full scan finds.
		if len(s) <= 4096 {
			lower := asciiLower(s)
			for k, p := range defaults() {
				if p.starts == nil {
					continue
				}
				got, want := findMatches(s, lower, p), p.re.re.FindAllStringSubmatchIndex(s, -1)
				if len(got) != len(want) {
					t.Fatalf("pattern %d on %q: %v vs %v", k+1, s, got, want)
				}
				for j := range got {
					for x := range got[j] {
						if got[j][x] != want[j][x] {
							t.Fatalf("pattern %d on %q: %v vs %v", k+1, s, got, want)
						}
					}
				}
			}
		}
		// Everything else a pattern can produce is built from the input.
		if !isMaskingOf(out, s) {
			t.Fatalf("output %q contains material not from %q", out, s)
		}
	})
}

// isMaskingOf checks that out is in with some spans replaced by mask
// material ("***", "…", "…redacted…"): with that material removed from both,
// out must be a subsequence of in.
func isMaskingOf(out, in string) bool {
	strip := strings.NewReplacer("…redacted…", "", "…", "", "*", "")
	return isEditOf(strip.Replace(out), strip.Replace(in))
}

// FuzzRedactPatterns is logging.redactPatterns: any pattern string is
// refused with a message naming it, or compiles into a redactor that masks
// what it matches in linear time, never panics, and still applies every
// default pattern to tool payloads.
func FuzzRedactPatterns(f *testing.F) {
	for _, p := range []string{
		"", "foo\\d+", "/sk-[a-z]+/g", "/x/gg", "(a+)+", "(?<=x)y", "\\1", "[", "/a/", "//", "/\\/", "a{2,}", "(?i)abc",
		"\\bkey\\b", "/[\\u{1F600}]/u", "\x00", "^$", ".*",
	} {
		f.Add(p, "value foo123 and sk-abc OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz")
	}
	secret := "ghp_" + strings.Repeat("Q", 36)
	f.Fuzz(func(t *testing.T, pattern, s string) {
		r, err := NewRedactor("", []string{pattern})
		if err != nil {
			if !strings.Contains(err.Error(), "logging.redactPatterns") {
				t.Fatalf("pattern %q refused without naming the key: %v", pattern, err)
			}
			return
		}
		out, _ := r.ToolPayload(s)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("pattern %q: invalid UTF-8 from %q: %q", pattern, s, out)
		}
		r.Log(s)
		planted := s + " " + secret + " "
		if utf16Len(planted) <= redactChunkThreshold {
			if got, _ := r.ToolPayload(planted); strings.Contains(got, secret) {
				t.Fatalf("with user pattern %q a default secret survived: %q", pattern, got)
			}
		}
	})
}

// FuzzExtractAssistantText is the sanitizer on a decoded transcript
// message, as sessions_send replies and announces read one: any JSON
// message gives text no longer than its parts, never a panic.
func FuzzExtractAssistantText(f *testing.F) {
	for _, s := range []string{
		`{"role":"assistant","content":"hi"}`, `{"role":"assistant","content":[{"type":"text","text":"<think>x</think>ok"}]}`,
		`{"role":"assistant","stopReason":"error","content":[{"type":"text","text":"429 rate limit"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"a","textSignature":"{\"phase\":\"final_answer\"}"},{"type":"text","text":"b","textSignature":"{\"phase\":\"commentary\"}"}]}`,
		`{"role":"user","content":"x"}`, `{"role":"assistant","content":[1,null,{"type":"text"}]}`, `{"role":"assistant","content":{"text":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		out := ExtractAssistantText(m)
		if m["role"] != "assistant" && out != "" {
			t.Fatalf("a %v message gave %q", m["role"], out)
		}
		if m["stopReason"] != "error" && len(out) > len(data) {
			t.Fatalf("text %q is longer than the message %q", out, data)
		}
	})
}
