package sanitize

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func encode(t *testing.T, m map[string]any) string {
	t.Helper()
	raw, err := MarshalCompact(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestHistoryMessage(t *testing.T) {
	secret := "ghp_" + strings.Repeat("D", 36)
	long := strings.Repeat("x", 4001)
	tests := []struct {
		name, in, want string
		visible        bool
		res            MessageResult
	}{
		{"heavy fields removed", `{"role":"assistant","content":"hi","details":{"a":1},"usage":{"input":3},"cost":0.1}`,
			`{"content":"hi","role":"assistant"}`, false, MessageResult{Truncated: true}},
		{"usage alone marks truncated", `{"role":"assistant","content":"hi","usage":{}}`,
			`{"content":"hi","role":"assistant"}`, false, MessageResult{Truncated: true}},
		{"content string redacted", `{"role":"user","content":"key ` + secret + `"}`,
			`{"content":"key ghp_DD…DDDD","role":"user"}`, false, MessageResult{Redacted: true}},
		{"content string truncated", `{"role":"user","content":"` + long + `"}`,
			`{"content":"` + long[:4000] + `\n…(truncated)…","role":"user"}`, false, MessageResult{Truncated: true}},
		{"text blocks", `{"role":"user","content":[{"type":"text","text":"` + secret + `"},"raw",7]}`,
			`{"content":[{"text":"ghp_DD…DDDD","type":"text"},"raw",7],"role":"user"}`, false, MessageResult{Redacted: true}},
		{"thinking block", `{"role":"assistant","content":[{"type":"thinking","thinking":"` + secret + `","thinkingSignature":"sig","openclawReasoningReplay":{"x":1}}]}`,
			`{"content":[{"thinking":"ghp_DD…DDDD","type":"thinking"}],"role":"assistant"}`, false, MessageResult{Truncated: true, Redacted: true}},
		{"partialJson", `{"role":"assistant","content":[{"type":"toolCall","partialJson":"{\"token\":\"abc\"}"}]}`,
			`{"content":[{"partialJson":"{\"token\":\"***\"}","type":"toolCall"}],"role":"assistant"}`, false, MessageResult{Redacted: true}},
		{"image data removed", `{"role":"user","content":[{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}]}`,
			`{"content":[{"bytes":5,"mimeType":"image/png","omitted":true,"type":"image"}],"role":"user"}`, false, MessageResult{Truncated: true}},
		{"image keeps numeric bytes", `{"role":"user","content":[{"type":"image","bytes":1234}]}`,
			`{"content":[{"bytes":1234,"omitted":true,"type":"image"}],"role":"user"}`, false, MessageResult{}},
		{"image non-string data", `{"role":"user","content":[{"type":"image","data":null,"bytes":9}]}`,
			`{"content":[{"bytes":9,"omitted":true,"type":"image"}],"role":"user"}`, false, MessageResult{Truncated: true}},
		{"redact before truncate", `{"role":"user","content":"` + strings.Repeat("x", 3990) + ` ` + secret + `"}`,
			`{"content":"` + strings.Repeat("x", 3990) + ` ghp_DD…DD` + `\n…(truncated)…","role":"user"}`, false, MessageResult{Truncated: true, Redacted: true}},
		{"top-level text", `{"role":"system","text":"TOKEN=abc"}`, `{"role":"system","text":"TOKEN=***"}`, false, MessageResult{Redacted: true}},
		{"visible off keeps tags", `{"role":"assistant","content":"<think>x</think>Hi"}`,
			`{"content":"<think>x</think>Hi","role":"assistant"}`, false, MessageResult{}},
		{"visible on strips assistant text", `{"role":"assistant","content":"<think>x</think>Hi <|end|>","text":"<tool_call>{}</tool_call>ok"}`,
			`{"content":"Hi ","role":"assistant","text":"ok"}`, true, MessageResult{}},
		{"visible on assistant blocks", `{"role":"assistant","content":[{"type":"text","text":"<relevant-memories>m</relevant-memories>A"},{"type":"thinking","thinking":"<think>keep</think>"}]}`,
			`{"content":[{"text":"A","type":"text"},{"thinking":"<think>keep</think>","type":"thinking"}],"role":"assistant"}`, true, MessageResult{}},
		{"visible on ignores other roles", `{"role":"user","content":"<think>x</think>Hi"}`,
			`{"content":"<think>x</think>Hi","role":"user"}`, true, MessageResult{}},
		{"visible then redact", `{"role":"assistant","content":"<think>` + secret + `</think>see ` + secret + `"}`,
			`{"content":"see ghp_DD…DDDD","role":"assistant"}`, true, MessageResult{Redacted: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := decode(t, tc.in)
			res := DefaultRedactor().HistoryMessage(m, tc.visible)
			if got := encode(t, m); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if res != tc.res {
				t.Fatalf("result %+v, want %+v", res, tc.res)
			}
		})
	}
}

func TestHistoryValueNonObjects(t *testing.T) {
	for _, v := range []any{"text", json.Number("1"), nil, []any{1}} {
		before, _ := json.Marshal(v)
		if res := DefaultRedactor().HistoryValue(v, true); res != (MessageResult{}) {
			t.Fatalf("%v: %+v", v, res)
		}
		after, _ := json.Marshal(v)
		if !bytes.Equal(before, after) {
			t.Fatal("non-object changed")
		}
	}
}

func TestEstimateBase64DecodedBytes(t *testing.T) {
	for in, want := range map[string]int{
		"":             0,
		"aGVsbG8=":     5,
		"aGVsbG8gd28=": 8,
		"aGk=":         2,
		"aGVs\nbG8=":   5,
		"aGVsbG8= \n":  5,
		"aG=\n=":       1,
		"YQ==":         1,
		"=":            0,
		"abcd":         3,
	} {
		if got := estimateBase64DecodedBytes(in); got != want {
			t.Fatalf("estimate(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestExtractAssistantText(t *testing.T) {
	sig := func(phase string) string {
		b, _ := json.Marshal(map[string]any{"v": 1, "id": "m1", "phase": phase})
		return string(b)
	}
	tests := []struct {
		name string
		msg  map[string]any
		want string
	}{
		{"not assistant", map[string]any{"role": "user", "content": "hi"}, ""},
		{"string content", map[string]any{"role": "assistant", "content": "  <think>x</think>Hello  "}, "Hello"},
		{"top-level text wins", map[string]any{"role": "assistant", "text": "A", "content": "B"}, "A"},
		{"blocks joined without separator", map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "Hello "},
			map[string]any{"type": "toolCall", "name": "x"},
			map[string]any{"type": "text", "text": "<tool_call>{}</tool_call>"},
			map[string]any{"type": "text", "text": "world"},
		}}, "Hello world"},
		{"final_answer only when phased", map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "thinking aloud", "textSignature": sig("commentary")},
			map[string]any{"type": "text", "text": "Answer", "textSignature": sig("final_answer")},
			map[string]any{"type": "text", "text": "legacy"},
		}}, "Answer"},
		{"phased without final answer is empty", map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "aloud", "textSignature": sig("commentary")},
			map[string]any{"type": "text", "text": "legacy"},
		}}, ""},
		{"plain signature id is unphased", map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "ok", "textSignature": "msg_1"},
		}}, "ok"},
		{"message phase", map[string]any{"role": "assistant", "phase": "final_answer", "content": []any{
			map[string]any{"type": "text", "text": "final"},
		}}, "final"},
		{"commentary message", map[string]any{"role": "assistant", "phase": "commentary", "content": "x"}, ""},
		{"error rewrite", map[string]any{"role": "assistant", "stopReason": "error", "content": "500 Internal Server Error"},
			"HTTP 500: Internal Server Error"},
		{"error rewrite with http prefix", map[string]any{"role": "assistant", "stopReason": "error", "content": "HTTP 429: Too Many Requests"},
			"HTTP 429: Too Many Requests"},
		{"error json payload", map[string]any{"role": "assistant", "stopReason": "error",
			"content": `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"r1"}`},
			"LLM error overloaded_error: Overloaded (request_id: r1)"},
		{"error with json after status", map[string]any{"role": "assistant", "stopReason": "error",
			"content": `400 {"error":{"type":"invalid_request_error","message":"bad"}}`},
			"HTTP 400 invalid_request_error: bad"},
		{"no rewrite without error stop", map[string]any{"role": "assistant", "content": "500 Internal Server Error"},
			"500 Internal Server Error"},
		{"error prose kept", map[string]any{"role": "assistant", "stopReason": "error", "content": "Something odd"}, "Something odd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExtractAssistantText(tc.msg); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
