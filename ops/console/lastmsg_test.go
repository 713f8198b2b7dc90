package console

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// The waiting mark follows the turn: the assistant's text after a
// person's message waits on the person; a tool call or result after it,
// or a new message, does not; a reply to another session's message never
// does, a reply to a child's announce does. The preview keeps who said it.
func TestLastTableWaiting(t *testing.T) {
	red := sanitize.DefaultRedactor()
	tab := newLastTable()
	apply := func(entry string) { tab.apply("k", []byte(entry), 1, red) }
	waiting := func() bool { l, ok := tab.get("k"); return ok && l.replied && !l.fromAgent }
	steps := []struct {
		entry   string
		waiting bool
		role    string
		preview string
	}{
		{`{"role":"user","content":"hello","provenance":{"kind":"external_user"}}`, false, "user", "hello"},
		{`{"role":"assistant","content":[{"type":"toolCall","name":"read"}]}`, false, "user", "hello"},
		{`{"role":"toolResult","content":"file"}`, false, "user", "hello"},
		{`{"role":"assistant","content":[{"type":"text","text":"hi  there\nfriend"}]}`, true, "assistant", "hi there friend"},
		{`{"type":"compaction","summary":"x"}`, true, "assistant", "hi there friend"},
		{`{"role":"user","content":"do it","provenance":{"kind":"inter_session","sourceSessionKey":"agent:main:other"}}`, false, "user", "do it"},
		{`{"role":"assistant","content":"done"}`, false, "assistant", "done"},
		{`{"role":"user","content":"child finished","provenance":{"kind":"internal_system"}}`, false, "user", "child finished"},
		{`{"role":"assistant","content":[{"type":"text","text":"your report is ready"}]}`, true, "assistant", "your report is ready"},
		{`{"role":"user","content":[{"type":"image"}]}`, false, "assistant", "your report is ready"},
	}
	for i, s := range steps {
		apply(s.entry)
		l, _ := tab.get("k")
		if waiting() != s.waiting || l.role != s.role || l.preview != s.preview {
			t.Fatalf("step %d (%s): waiting %v role %q preview %q, want %v %q %q", i, s.entry, waiting(), l.role, l.preview, s.waiting, s.role, s.preview)
		}
	}
	if got := tab.replied(); len(got) != 0 {
		t.Fatalf("replied: %v, want none", got)
	}
	apply(`{"role":"assistant","content":"` + strings.Repeat("é", 300) + `"}`)
	if l, _ := tab.get("k"); len([]rune(l.preview)) != PreviewMaxChars+1 || !strings.HasSuffix(l.preview, "…") {
		t.Fatalf("long preview: %d runes", len([]rune(l.preview)))
	}
	if got := tab.replied(); len(got) != 1 {
		t.Fatalf("replied: %v, want k", got)
	}
}

// A silent reply (NO_REPLY and the other sentinels) to a person's message
// is the agent choosing to say nothing: no one waits on it, and the
// preview stays the message before it.
func TestLastTableSilentReply(t *testing.T) {
	red := sanitize.DefaultRedactor()
	for _, s := range []string{"NO_REPLY", " ANNOUNCE_SKIP\n", "REPLY_SKIP"} {
		tab := newLastTable()
		tab.apply("k", []byte(`{"role":"user","content":"child finished","provenance":{"kind":"internal_system"}}`), 1, red)
		b, _ := json.Marshal(map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": s}}})
		tab.apply("k", b, 2, red)
		if l, _ := tab.get("k"); l.replied || l.preview != "child finished" {
			t.Fatalf("after %q: replied %v, preview %q", s, l.replied, l.preview)
		}
		if got := tab.replied(); len(got) != 0 {
			t.Fatalf("after %q: waiting on %v", s, got)
		}
	}
}
