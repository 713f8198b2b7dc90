package runtime

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// CompactionSummaryPrefix opens the user message that carries a compaction
// summary to the model, the shape OpenClaw's runtime gives it.
const CompactionSummaryPrefix = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"

// compactionSummarySuffix closes it.
const compactionSummarySuffix = "\n</summary>"

// missingToolResult is what the model is told for a call the transcript
// holds no result of: every call must be answered, or the provider refuses
// the request.
const missingToolResult = `{"status":"error","error":"missing tool result: the transcript holds none for this call"}`

// transcriptLine is the part of a transcript entry the model's context is
// made of: OpenClaw's line ({"type":"message","message":{…}}, a
// {"type":"compaction",…} entry) or a bare message.
type transcriptLine struct {
	Type             string          `json:"type"`
	Message          json.RawMessage `json:"message"`
	Summary          string          `json:"summary"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
	ToolCallID       string          `json:"toolCallId"`
	ToolCallIDOpenAI string          `json:"tool_call_id"`
}

// entryMessages maps one transcript entry to chat messages, unpaired:
// user and assistant text, an assistant's tool calls (OpenClaw's toolCall
// blocks or an OpenAI tool_calls array), tool results (OpenClaw's
// toolResult role or OpenAI's tool role), and a compaction summary as a
// user message. Anything else (session headers, model changes, custom
// entries) is not part of the model's context.
func entryMessages(raw json.RawMessage) []chatMessage {
	var h transcriptLine
	if json.Unmarshal(raw, &h) != nil {
		return nil
	}
	switch h.Type {
	case "compaction":
		if strings.TrimSpace(h.Summary) == "" {
			return nil
		}
		return []chatMessage{{Role: "user", Content: text(CompactionSummaryPrefix + h.Summary + compactionSummarySuffix)}}
	case "message":
		var inner transcriptLine
		if len(h.Message) == 0 || json.Unmarshal(h.Message, &inner) != nil {
			return nil
		}
		h = inner
	case "":
	default:
		return nil
	}
	switch h.Role {
	case "user":
		if s := contentText(h.Content); s != "" {
			return []chatMessage{{Role: "user", Content: text(s)}}
		}
	case "assistant":
		return assistantMessage(h)
	case "toolResult", "tool":
		id := h.ToolCallID
		if id == "" {
			id = h.ToolCallIDOpenAI
		}
		if id == "" {
			return nil
		}
		return []chatMessage{{Role: "tool", ToolCallID: id, Content: text(contentText(h.Content))}}
	}
	return nil
}

// assistantMessage reads an assistant entry's text and tool calls.
func assistantMessage(h transcriptLine) []chatMessage {
	m := chatMessage{Role: "assistant"}
	s := contentText(h.Content)
	var calls []chatToolCall
	if tc, err := parseToolCalls(h.ToolCalls); err == nil {
		calls = tc
	}
	var blocks []struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(h.Content, &blocks) == nil {
		for _, b := range blocks {
			if b.Type == "toolCall" && b.Name != "" {
				c := chatToolCall{ID: b.ID, Type: "function"}
				c.Function.Name, c.Function.Arguments = b.Name, b.Arguments
				calls = append(calls, c)
			}
		}
	}
	if s == "" && len(calls) == 0 {
		return nil
	}
	if s != "" {
		m.Content = text(s)
	}
	if len(calls) > 0 {
		m.ToolCalls = rebuildToolCalls(calls)
	}
	return []chatMessage{m}
}

// historyMessages is the model's context from transcript entries, oldest
// first, after OpenClaw's transcript hygiene: each assistant tool call is
// followed by its result (a call the transcript never answered gets an
// error result), a result whose call is not right before it is dropped,
// and tool call ids are made safe for strict providers (letters, digits,
// _ and -, at most 64), the same on the call and its result.
func historyMessages(raw []json.RawMessage) []chatMessage {
	var flat []chatMessage
	for _, m := range raw {
		flat = append(flat, entryMessages(m)...)
	}
	out := make([]chatMessage, 0, len(flat))
	ids := idSanitizer{}
	for i := 0; i < len(flat); i++ {
		m := flat[i]
		switch {
		case m.Role == "tool":
			continue // orphaned: its call is not right before it
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			calls, _ := parseToolCalls(m.ToolCalls)
			results := map[string]chatMessage{}
			for i+1 < len(flat) && flat[i+1].Role == "tool" {
				i++
				results[flat[i].ToolCallID] = flat[i]
			}
			for j := range calls {
				if calls[j].ID == "" {
					calls[j].ID = "call_" + strconv.Itoa(len(out)) + "_" + strconv.Itoa(j)
				}
			}
			am := m
			safe := make([]chatToolCall, len(calls))
			for j, c := range calls {
				safe[j] = c
				safe[j].ID = ids.safe(c.ID)
			}
			am.ToolCalls = rebuildToolCalls(safe)
			out = append(out, am)
			for j, c := range calls {
				res, ok := results[c.ID]
				if !ok {
					res = chatMessage{Role: "tool", Content: text(missingToolResult)}
				}
				res.ToolCallID = safe[j].ID
				out = append(out, res)
			}
		default:
			out = append(out, m)
		}
	}
	return out
}

var unsafeIDChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// idSanitizer maps tool call ids to provider-safe ones, consistently and
// without collisions.
type idSanitizer map[string]string

func (s idSanitizer) safe(id string) string {
	if v, ok := s[id]; ok {
		return v
	}
	v := unsafeIDChars.ReplaceAllString(id, "_")
	if len(v) > 64 {
		v = v[:64]
	}
	for n := 2; s.taken(v, id); n++ {
		suffix := "_" + strconv.Itoa(n)
		v = v[:min(len(v), 64-len(suffix))] + suffix
	}
	s[id] = v
	return v
}

func (s idSanitizer) taken(v, id string) bool {
	for k, x := range s {
		if x == v && k != id {
			return true
		}
	}
	return false
}

// EstimateTokens is OpenClaw's estimate of what a transcript entry costs
// in the model's context: its characters (text, tool names, arguments and
// results) over four, rounded up. The provider's usage corrects it after a
// call.
func EstimateTokens(raw json.RawMessage) int64 {
	var chars int
	for _, m := range entryMessages(raw) {
		if m.Content != nil {
			chars += len(*m.Content)
		}
		chars += len(m.ToolCalls)
	}
	return EstimateText(chars)
}

// EstimateText is the token estimate of n characters.
func EstimateText(n int) int64 { return int64((n + 3) / 4) }
