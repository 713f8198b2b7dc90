package runtime

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

// fakeSteering steers msgs in once the first tool call ran.
type fakeSteering struct {
	mu     sync.Mutex
	tools  *fakeTools
	msgs   []string
	drains int
}

func (f *fakeSteering) Pending(context.Context) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.msgs) > 0 && len(f.tools.calls) >= 1
}

func (f *fakeSteering) Drain(context.Context) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drains++
	if len(f.tools.calls) == 0 {
		return nil
	}
	out := f.msgs
	f.msgs = nil
	return out
}

// TestOpenAISteeredMessageSkipsTheRestOfTheBatch: a message steered in
// while the first of three tool calls runs: the other two are answered
// OpenClaw's skip text without running, and the next model request holds
// the tool results, then the message, once.
func TestOpenAISteeredMessageSkipsTheRestOfTheBatch(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			resp := toolCallResponse("call_1", "sessions_list", `{}`)
			msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			calls := msg["tool_calls"].([]any)
			for i := 2; i <= 3; i++ {
				calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]any{"name": "session_status", "arguments": `{}`}})
			}
			msg["tool_calls"] = calls
			writeJSON(w, resp)
			return
		}
		writeJSON(w, textResponse("done"))
	})
	rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1/", nil))
	tools := &fakeTools{}
	st := &fakeSteering{tools: tools, msgs: []string{"use the short list"}}
	res, err := rt.Run(context.Background(), Turn{SessionKey: "agent:research:main", Prompt: "go", Steering: st}, tools)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.calls) != 1 {
		t.Fatalf("%d tools ran, want the first only", len(tools.calls))
	}
	if len(res.ToolCalls) != 3 || res.ToolCalls[1].Err != config.SkippedToolText || res.ToolCalls[2].Err != config.SkippedToolText {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	if s.requests() != 2 {
		t.Fatalf("%d model requests", s.requests())
	}
	msgs := s.body(1)["messages"].([]any)
	var roles, contents []string
	for _, m := range msgs {
		mm := m.(map[string]any)
		roles = append(roles, fmt.Sprint(mm["role"]))
		contents = append(contents, fmt.Sprint(mm["content"]))
	}
	if fmt.Sprint(roles) != "[user assistant tool tool tool user]" {
		t.Fatalf("second request's roles %v", roles)
	}
	if contents[4] != config.SkippedToolText || contents[5] != "use the short list" {
		t.Fatalf("second request's contents %q", contents)
	}
}
