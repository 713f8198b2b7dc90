package console

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// The session page of an admin or ops login is read on the console's own
// operator path: the entry from the index, the transcript from the
// transcripts stream, the signal log from its stream, the runs from the
// runs bucket. A session's own tool policy (a sub-agent's deny list, a
// leaf's missing sessions_history) is about what that agent may do, not
// what the operator may read, so it never decides this page. The text
// still goes through the same redaction sessions_history applies.

// transcriptPage is how many of a session's newest entries the page shows.
const transcriptPage = 200

// silent reports a message whose visible text is only a silent reply.
func silent(m map[string]any) bool {
	return m["role"] == "assistant" && onlyText(m) && sanitize.IsSilentReply(previewText(m))
}

// onlyText reports a message that carries nothing but text (a tool call
// beside a silent reply still shows).
func onlyText(m map[string]any) bool {
	blocks, ok := m["content"].([]any)
	if !ok {
		return true
	}
	for _, b := range blocks {
		if bm, ok := b.(map[string]any); ok && bm["type"] != nil && bm["type"] != "text" {
			return false
		}
	}
	return true
}

// Field is one line of a status card.
type Field struct {
	Label string `json:"label"`
	Value string `json:"value"`
	// Kind tells the page how to show Value: "time" (unix ms), "key" (a
	// session key it links), "" (text).
	Kind string `json:"kind,omitempty"`
}

// card is the status card of an entry, as fields, lines with nothing to
// say left out.
func (s *Server) card(e *sessions.Entry) []Field {
	var out []Field
	add := func(label, value, kind string) {
		if value != "" && value != "0" {
			out = append(out, Field{label, value, kind})
		}
	}
	ms := func(v int64) string {
		if v == 0 {
			return ""
		}
		return strconv.FormatInt(v, 10)
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	add("agent", agentOf(e), "")
	add("kind", rules.Kind(e.Key, alias, e.ChatType), "")
	add("model", s.modelOf(e), "")
	add("thinking", e.Rares().ThinkingLevel, "")
	add("status", e.Status, "")
	add("session id", e.SessionID, "")
	add("label", e.Label, "")
	add("name", e.DisplayName, "")
	add("channel", rules.FirstNonEmpty(e.Channel, e.LastChannel), "")
	add("last to", e.LastTo, "")
	add("spawned by", e.Parent(), "key")
	if e.SpawnDepth != nil {
		add("spawn depth", strconv.Itoa(*e.SpawnDepth), "")
	}
	add("subagent role", e.Rares().SubagentRole, "")
	if e.InputTokens > 0 || e.OutputTokens > 0 {
		add("tokens", n(e.InputTokens)+" in / "+n(e.OutputTokens)+" out / "+n(e.TotalTokens)+" total", "")
	}
	if e.ContextTokens > 0 {
		add("context window", n(e.ContextTokens), "")
	}
	add("compactions", n(e.Rares().CompactionCount), "")
	if g := e.Rares().Goal; g.Active() {
		add("goal", g.Objective, "")
	}
	if e.AbortedLastRun {
		add("last run", "aborted", "")
	}
	if e.Archived {
		add("archived", "yes", "")
	}
	add("created", ms(e.CreatedAt), "time")
	add("updated", ms(e.UpdatedAt), "time")
	add("started", ms(e.StartedAt), "time")
	add("ended", ms(e.EndedAt), "time")
	return out
}

// modelOf is the model a session's turns use: its override, else its
// agent's as the deployment's config says (when the console was given
// it), else what the entry or its sub-agent record names.
func (s *Server) modelOf(e *sessions.Entry) string {
	if m := e.Rares().ModelOverride; m != "" {
		if p := e.Rares().ProviderOverride; p != "" {
			return p + "/" + m
		}
		return m
	}
	if s.o.AgentModel != nil {
		if m := s.o.AgentModel(agentOf(e)); m != "" {
			return m
		}
	}
	if e.Model != "" {
		if e.ModelProvider != "" && !strings.Contains(e.Model, "/") {
			return e.ModelProvider + "/" + e.Model
		}
		return e.Model
	}
	if rec := s.children.Get(e.Key); rec != nil {
		return rec.Model
	}
	return ""
}

// cardFromStatusText is the card of a token login: the first block of
// session_status's text (its card, before the route and state blocks),
// one field per "label: value" line.
func cardFromStatusText(text string) []Field {
	head, _, _ := strings.Cut(text, "\n\n")
	var out []Field
	for _, line := range strings.Split(head, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		label, value, ok := strings.Cut(line, ": ")
		if !ok {
			label, value = "", line
		}
		out = append(out, Field{Label: strings.TrimSpace(label), Value: strings.TrimSpace(value)})
	}
	return out
}

// consoleMeta rides on each message of the operator path's transcript:
// what the page shows beside a message and sessions_history leaves out.
type consoleMeta struct {
	N     uint64           `json:"n"`
	Seq   uint64           `json:"seq"` // stream sequence: a search hit's address
	At    int64            `json:"at"`
	RunID string           `json:"runId,omitempty"`
	Usage map[string]int64 `json:"usage,omitempty"`
	Cost  float64          `json:"cost,omitempty"`
}

// transcript is the newest limit entries of key as the page shows them:
// each message redacted as sessions_history redacts it, silent replies
// left out, a compaction kept with its (redacted) summary, and each with
// its number, stream sequence, time, run and usage. at (1-based, 0:
// none) is an entry the page opens at: when it is older than the newest
// limit, the page is limit entries around it instead, and "first" says
// where it starts.
func (s *Server) transcript(ctx context.Context, key string, limit int, at uint64) (map[string]any, error) {
	enc := bus.EncodeKey(key)
	es, total, err := s.tr.Tail(ctx, enc, limit, 0)
	if err != nil {
		return nil, err
	}
	if at > 0 && len(es) > 0 && at-1 < es[0].N {
		from := at - 1 - min(at-1, uint64(limit/2))
		if es, err = s.tr.Read(ctx, enc, from, from+uint64(limit)); err != nil {
			return nil, err
		}
	}
	msgs := make([]map[string]any, 0, len(es))
	var first uint64
	if len(es) > 0 {
		first = es[0].N
	}
	for _, e := range es {
		if m := s.viewEntry(e.Data, e.N, e.Seq, e.Time); m != nil {
			msgs = append(msgs, m)
		}
	}
	return map[string]any{"messages": msgs, "totalEntries": total, "shown": len(es), "first": first}, nil
}

func (s *Server) viewEntry(data []byte, n, seq uint64, at time.Time) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || m == nil {
		return nil
	}
	meta := consoleMeta{N: n, Seq: seq, At: at.UnixMilli()}
	if mk, ok := m["__sessionbus"].(map[string]any); ok {
		meta.RunID, _ = mk["run"].(string)
	}
	delete(m, "__sessionbus")
	if m["type"] == "compaction" {
		summary, _ := m["summary"].(string)
		summary, _ = s.redactor.ToolPayload(summary)
		if cut, ok := sanitize.TruncateUTF16(summary, sanitize.HistoryTextMaxChars); ok {
			summary = cut
		}
		out := map[string]any{"type": "compaction", "summary": summary, "tokensBefore": m["tokensBefore"], "__console": meta}
		return out
	}
	if silent(m) {
		return nil
	}
	if u, ok := m["usage"].(map[string]any); ok {
		meta.Usage = numbers(u)
		if c, ok := u["cost"].(map[string]any); ok {
			if t, ok := c["total"].(json.Number); ok {
				meta.Cost, _ = t.Float64()
			}
		}
	}
	s.redactor.HistoryMessage(m, true)
	m["__console"] = meta
	return m
}

// signalLog is the session's signal log as the page shows it: the events
// with their summaries redacted and no payloads (those may quote text the
// card does not show).
func (s *Server) signalLog(ctx context.Context, key string) (signals.Changes, uint64, error) {
	v, err := s.signals.StateVersion(ctx, key)
	if err != nil {
		return signals.Changes{}, 0, err
	}
	ch, err := s.signals.Since(ctx, key, 0, signals.MaxLimit)
	if err != nil {
		return ch, v, err
	}
	for i := range ch.Events {
		ch.Events[i].Payload = nil
		ch.Events[i].Summary, _ = s.redactor.ToolPayload(ch.Events[i].Summary)
	}
	return ch, v, nil
}
