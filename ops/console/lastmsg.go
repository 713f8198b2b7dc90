package console

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// The sessions page's last-message previews and "waiting on a human"
// marks come from one ordered consumer on the transcripts stream that
// starts with each session's newest entry and then follows every append.
// So a page of rows costs map look-ups, never a transcript read per row,
// and the table holds one short line per session.

// PreviewMaxChars bounds a row's preview (UTF-16 units, as sessions_list
// counts them).
const PreviewMaxChars = 120

// lastMsg is what the console knows of a session's newest message.
type lastMsg struct {
	role    string // who said the preview: user or assistant
	preview string // one redacted line, at most PreviewMaxChars
	at      int64  // the message's stream time, unix ms
	// replied says the newest entry is the assistant's text: the turn is
	// over (a tool call or result after it says it goes on)
	replied bool
	// fromAgent says the prompt of the turn was another session's message
	// (sessions_send, spawn, steer): its reply goes back to that agent, so
	// no person waits on it
	fromAgent bool
}

type lastTable struct {
	mu sync.RWMutex
	m  map[string]*lastMsg
}

func newLastTable() *lastTable { return &lastTable{m: map[string]*lastMsg{}} }

func (t *lastTable) get(key string) (lastMsg, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if l := t.m[key]; l != nil {
		return *l, true
	}
	return lastMsg{}, false
}

// replied is the sessions whose newest entry is the assistant's reply to
// a person.
func (t *lastTable) replied() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []string
	for k, l := range t.m {
		if l.replied && !l.fromAgent {
			out = append(out, k)
		}
	}
	return out
}

// fromAgent reports a user message that is another session's: an
// inter_session one (sessions_send, a spawn's task, a steer) is answered
// to its agent; a person's (external_user, or none) and a child's
// announce or a watch notice (internal_system, which the parent answers
// to its person) leave a person waiting.
func fromAgent(m map[string]any) bool {
	p, _ := m["provenance"].(map[string]any)
	return p != nil && p["kind"] == "inter_session"
}

// apply takes one transcript entry of key and reports whether its row
// changed. Tool calls, tool results and bookkeeping entries keep the
// previous preview.
func (t *lastTable) apply(key string, data []byte, at int64, red *sanitize.Redactor) bool {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil || m == nil {
		return false
	}
	role, _ := m["role"].(string)
	if role == "" {
		return false // a compaction or another bookkeeping entry
	}
	text := ""
	// a silent reply (NO_REPLY, ...) says nothing to anyone: like a
	// message without text, it neither previews nor leaves a person waiting
	if (role == "user" || role == "assistant") && !silent(m) {
		text = strings.TrimSpace(previewText(m))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.m[key]
	if text == "" {
		// a tool call, a tool result or a message without text: the turn
		// goes on, or a new one starts
		if l == nil {
			l = &lastMsg{}
			t.m[key] = l
		}
		changed := l.replied
		l.replied = false
		if role == "user" {
			l.fromAgent = fromAgent(m)
		}
		return changed
	}
	from := l != nil && l.fromAgent
	if role == "user" {
		from = fromAgent(m)
	}
	s, _ := red.ToolPayload(text)
	s = strings.Join(strings.Fields(s), " ")
	if cut, ok := sanitize.TruncateUTF16(s, PreviewMaxChars); ok {
		s = strings.TrimSuffix(cut, sanitize.TruncatedMarker) + "…"
	}
	t.m[key] = &lastMsg{role: role, preview: s, at: at, replied: role == "assistant", fromAgent: from}
	return true
}

// previewText is a message's visible text: an assistant's as its history
// shows it (reasoning and tool markup stripped), anyone else's text parts.
func previewText(m map[string]any) string {
	if m["role"] == "assistant" {
		return sanitize.ExtractAssistantText(m)
	}
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, blk := range c {
			if bm, ok := blk.(map[string]any); ok && (bm["type"] == nil || bm["type"] == "text") {
				if s, ok := bm["text"].(string); ok {
					parts = append(parts, s)
				}
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

func (t *lastTable) remove(key string) {
	t.mu.Lock()
	delete(t.m, key)
	t.mu.Unlock()
}

// followTranscripts starts the consumer; the table fills while the
// console already serves (rows show no preview until their entry is read).
func (s *Server) followTranscripts(ctx, wctx context.Context) error {
	names := s.o.Names
	prefix := names.Transcript("")
	cons, err := s.js.OrderedConsumer(ctx, names.TranscriptsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{names.Transcript(">")},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		key := decodeKey(strings.TrimPrefix(msg.Subject(), prefix))
		var at int64
		if md, err := msg.Metadata(); err == nil {
			at = md.Timestamp.UnixMilli()
		}
		if s.last.apply(key, msg.Data(), at, s.redactor) {
			s.hub.mark(key, false)
		}
	})
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-wctx.Done()
		cc.Stop()
	}()
	return nil
}

// waiting reports whether a person is waited on in session e: its newest
// message is the agent's reply (with text, no tool call after it) to a
// person's message, no run of it is in flight, and it is a session people
// talk to (a channel message has reached it; not a sub-agent's).
func (s *Server) waiting(e *sessions.Entry, active bool) bool {
	if active || e.Parent() != "" || rules.IsSubagentKey(e.Key) || rules.FirstNonEmpty(e.LastChannel, e.Channel) == "" {
		return false
	}
	l, ok := s.last.get(e.Key)
	return ok && l.replied && !l.fromAgent
}
