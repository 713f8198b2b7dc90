package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestOpenAIUsageAddsUpOverToolRounds: the usage of each call of a tool
// loop is read (non-streaming here) and added up; the last call's prompt
// is the context's size, and cached tokens are not counted as input.
func TestOpenAIUsageAddsUpOverToolRounds(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		var resp map[string]any
		if n == 0 {
			resp = toolCallResponse("call_1", "sessions_list", `{}`)
			resp["usage"] = map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": map[string]any{"cached_tokens": 40}}
		} else {
			resp = textResponse("done")
			resp["usage"] = map[string]any{"prompt_tokens": 130, "completion_tokens": 7, "cache_creation_input_tokens": 5}
		}
		writeJSON(w, resp)
	})
	rt := mustNew(t, openAIAgent(t, s.srv.URL, nil))
	res, err := rt.Run(context.Background(), Turn{Message: "hi"}, &fakeTools{})
	if err != nil {
		t.Fatal(err)
	}
	u := res.Usage
	if u == nil {
		t.Fatal("no usage")
	}
	want := Usage{Input: 60 + 125, Output: 17, CacheRead: 40, CacheWrite: 5, Prompt: 130, LastOutput: 7, Calls: 2}
	if *u != want {
		t.Fatalf("usage %+v, want %+v", *u, want)
	}
	if so, _ := s.body(0)["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Fatalf("request did not ask for usage in the stream: %v", s.body(0)["stream_options"])
	}
}

// TestOpenAIStreamedUsage: the usage chunk a stream ends with (choices
// empty) is read; a stream without one leaves Usage nil (the provider
// reported none).
func TestOpenAIStreamedUsage(t *testing.T) {
	withUsage := true
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		events := []string{textChunk("hello"), stopChunk}
		if withUsage {
			events = append(events, `{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":3,"total_tokens":53}}`)
		}
		writeSSE(w, append(events, "[DONE]")...)
	})
	rt := mustNew(t, openAIAgent(t, s.srv.URL, nil))
	res, err := rt.Run(context.Background(), Turn{Message: "hi"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "hello" || res.Usage == nil || res.Usage.Input != 50 || res.Usage.Output != 3 || res.Usage.ContextTokens() != 53 {
		t.Fatalf("result %+v usage %+v", res, res.Usage)
	}
	withUsage = false
	res, err = rt.Run(context.Background(), Turn{Message: "hi"}, nil)
	if err != nil || res.Usage != nil {
		t.Fatalf("no usage reported: got %+v, %v", res.Usage, err)
	}
}

// TestHistoryHygiene: OpenClaw-shaped entries become chat messages with
// each tool call followed by its result, an unanswered call answered with
// an error, an orphaned result dropped, unsafe ids replaced on both sides,
// and a compaction entry as the summary's user message.
func TestHistoryHygiene(t *testing.T) {
	raw := []json.RawMessage{
		json.RawMessage(`{"type":"compaction","summary":"## Goal\nship it","firstKeptEntry":3}`),
		json.RawMessage(`{"type":"session","version":3}`),
		json.RawMessage(`{"type":"message","message":{"role":"user","content":[{"type":"text","text":"list them"}]}}`),
		json.RawMessage(`{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"looking"},{"type":"toolCall","id":"call|1","name":"sessions_list","arguments":{"limit":2}},{"type":"toolCall","id":"call|2","name":"session_status","arguments":{}}]}}`),
		json.RawMessage(`{"type":"message","message":{"role":"toolResult","toolCallId":"call|1","toolName":"sessions_list","content":[{"type":"text","text":"{\"count\":2}"}]}}`),
		json.RawMessage(`{"role":"toolResult","toolCallId":"gone","content":"orphan"}`),
		json.RawMessage(`{"role":"assistant","content":"two sessions"}`),
	}
	got := historyMessages(raw)
	var roles []string
	for _, m := range got {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,user,assistant,tool,tool,assistant" {
		t.Fatalf("roles %v", roles)
	}
	if !strings.HasPrefix(*got[0].Content, CompactionSummaryPrefix) || !strings.Contains(*got[0].Content, "ship it") {
		t.Fatalf("summary message %q", *got[0].Content)
	}
	calls, _ := parseToolCalls(got[2].ToolCalls)
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[1].ID != "call_2" {
		t.Fatalf("calls %s", got[2].ToolCalls)
	}
	if got[3].ToolCallID != "call_1" || *got[3].Content != `{"count":2}` {
		t.Fatalf("first result %+v", got[3])
	}
	if got[4].ToolCallID != "call_2" || *got[4].Content != missingToolResult {
		t.Fatalf("synthesized result %+v", got[4])
	}
}

// TestScriptUsageAndSummary: a script rule's declared usage is the
// turn's; script.summary is its compaction summary, and an empty one is
// an error.
func TestScriptUsageAndSummary(t *testing.T) {
	agents := loadAgents(t, `
agents:
  list:
    - id: main
      script:
        summary: "the summary"
        rules:
          - match: "^hi"
            reply: "hello"
            usage: {input: 12, output: 3, cacheRead: 4, cacheWrite: 1}
    - id: empty
      script:
        summary: ""
`)
	rt := mustNew(t, agents["main"])
	res, err := rt.Run(context.Background(), Turn{Message: "hi"}, nil)
	if err != nil || res.Usage == nil || *res.Usage != (Usage{Input: 12, Output: 3, CacheRead: 4, CacheWrite: 1, Prompt: 17, LastOutput: 3, Calls: 1}) {
		t.Fatalf("usage %+v, %v", res.Usage, err)
	}
	sum := rt.(Summarizer)
	if s, _, err := sum.Summarize(context.Background(), SummaryRequest{}); err != nil || s != "the summary" {
		t.Fatalf("summary %q, %v", s, err)
	}
	_, _, err = mustNew(t, agents["empty"]).(Summarizer).Summarize(context.Background(), SummaryRequest{})
	wantErrContains(t, err, "script.summary is empty")
}

// TestOpenAISummarizePrompt: the summary request has OpenClaw's shape
// (system prompt, the conversation in tags, the update prompt with the
// previous summary) and offers no tools; an empty reply is an error.
func TestOpenAISummarizePrompt(t *testing.T) {
	reply := "## Goal\nmerged"
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) { writeJSON(w, textResponse(reply)) })
	sum := mustNew(t, openAIAgent(t, s.srv.URL, nil)).(Summarizer)
	conv := SerializeConversation([]json.RawMessage{json.RawMessage(`{"role":"user","content":"build a bus"}`), json.RawMessage(`{"role":"assistant","content":"ok"}`)})
	got, _, err := sum.Summarize(context.Background(), SummaryRequest{Conversation: conv, PreviousSummary: "old"})
	if err != nil || got != reply {
		t.Fatalf("summary %q, %v", got, err)
	}
	body := s.body(0)
	if body["tools"] != nil {
		t.Fatalf("tools offered to the summarizer: %v", body["tools"])
	}
	msgs := body["messages"].([]any)
	user := msgs[1].(map[string]any)["content"].(string)
	for _, want := range []string{"<conversation>\n[User]: build a bus\n\n[Assistant]: ok\n</conversation>", "<previous-summary>\nold\n</previous-summary>", "## Critical Context"} {
		if !strings.Contains(user, want) {
			t.Fatalf("summary prompt lacks %q:\n%s", want, user)
		}
	}
	reply = "  "
	_, _, err = sum.Summarize(context.Background(), SummaryRequest{Conversation: conv})
	wantErrContains(t, err, "came back empty")
}
