package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/gateway/completion"
	"github.com/sessionbus/sessionbus/ops/replay"
)

// The timeline of a session: what `sessionbus replay` prints (its runs'
// steps, transcript entries and signal events in time order, read by the
// same reader), with each transcript entry named for what it is (a model
// reply with its usage, a tool call, a tool result, a compaction) and its
// run. Text is redacted as the transcript page's is; the stored records
// themselves are not sent.

// timelineMax bounds one timeline: the newest events are kept.
const timelineMax = 2000

// TimelineEvent is one line of the timeline.
type TimelineEvent struct {
	At     int64            `json:"at"`
	Source string           `json:"source"`
	Kind   string           `json:"kind"`
	RunID  string           `json:"runId,omitempty"`
	Text   string           `json:"text"`
	Usage  map[string]int64 `json:"usage,omitempty"`
}

// Timeline is a session's timeline.
type Timeline struct {
	Key       string          `json:"key"`
	Events    []TimelineEvent `json:"events"`
	Truncated bool            `json:"truncated,omitempty"`
}

func (s *Server) handleTimeline(w http.ResponseWriter, r *http.Request) {
	if userOf(r).Token != "" {
		writeError(w, http.StatusForbidden, "a token login has no timeline: it reads the runs bucket and the streams directly, which a session's tools do not show")
		return
	}
	key := r.URL.Query().Get("key")
	if s.index.Get(key) == nil {
		writeError(w, http.StatusNotFound, "no session "+strconv.Quote(key)+" (it may have been deleted or never existed)")
		return
	}
	rp, err := replay.New(s.js, s.o.Names, key)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	evs, err := rp.History(ctx, false)
	if err != nil {
		writeError(w, http.StatusBadGateway, "read the session's history: "+err.Error())
		return
	}
	t := Timeline{Key: key, Events: make([]TimelineEvent, 0, min(len(evs), timelineMax))}
	if len(evs) > timelineMax {
		evs, t.Truncated = evs[len(evs)-timelineMax:], true
	}
	for _, ev := range evs {
		t.Events = append(t.Events, s.timelineEvent(ev))
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) timelineEvent(ev replay.Event) TimelineEvent {
	out := TimelineEvent{At: ev.Time.UnixMilli(), Source: ev.Source, Kind: ev.Kind, RunID: ev.RunID, Text: ev.Text}
	if ev.Source == replay.SourceTranscript {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(string(ev.Data)))
		dec.UseNumber()
		if dec.Decode(&m) == nil && m != nil {
			if mk, ok := m["__sessionbus"].(map[string]any); ok {
				out.RunID, _ = mk["run"].(string)
			}
			switch {
			case m["type"] == "compaction":
				out.Kind, out.Text = "compaction", "compacted"
				if n, ok := m["tokensBefore"].(json.Number); ok {
					out.Text += " at " + n.String() + " tokens"
				}
			case m["role"] == "assistant":
				if calls := toolCalls(m); len(calls) > 0 {
					out.Kind = "tool call"
					out.Text = strings.Join(calls, ", ")
				} else {
					out.Kind = "model reply"
				}
				out.Usage = numbers(m["usage"])
			case m["role"] == "toolResult" || m["role"] == "tool":
				out.Kind = "tool result"
				if n, _ := m["toolName"].(string); n != "" {
					out.Text = n + ": " + out.Text
				}
			case m["role"] == "user":
				if strings.Contains(previewText(m), completion.BeginContext) {
					out.Kind = "announce"
				}
			}
		}
	}
	out.Text, _ = s.redactor.ToolPayload(out.Text)
	return out
}

// toolCalls names the tools an assistant message calls.
func toolCalls(m map[string]any) []string {
	blocks, _ := m["content"].([]any)
	var out []string
	for _, b := range blocks {
		if bm, ok := b.(map[string]any); ok {
			switch bm["type"] {
			case "toolCall", "tool_use", "toolUse", "functionCall":
				n, _ := bm["name"].(string)
				out = append(out, n)
			}
		}
	}
	return out
}

// numbers keeps an object's integer fields (a usage record's counts).
func numbers(v any) map[string]int64 {
	o, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := map[string]int64{}
	for k, x := range o {
		if n, ok := x.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				out[k] = i
			}
		}
	}
	return out
}
