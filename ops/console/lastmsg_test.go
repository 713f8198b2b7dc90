package console

import (
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
