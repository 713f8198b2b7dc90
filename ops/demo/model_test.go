package demo

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/config"
)

// stream posts one streamed chat-completions request and returns its text,
// the tool it called ("" for none), and whether it ended with [DONE].
func stream(t *testing.T, m *Model, body string) (text, tool string, done bool, chunks int) {
	t.Helper()
	res, err := http.Post(m.BaseURL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Function struct{ Name string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				text += ch.Delta.Content
				chunks++
			}
			for _, tc := range ch.Delta.ToolCalls {
				tool = tc.Function.Name
			}
		}
	}
	return text, tool, done, chunks
}

// The demo model streams a word at a time at its pace, calls
// sessions_list when it is offered, and answers once the tool's result is
// in; the demo's config gets the agent it runs only when the demo made
// the config.
func TestDemoModel(t *testing.T) {
	const pace = 10 * time.Millisecond
	m, err := StartModel(pace)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	start := time.Now()
	text, tool, done, _ := stream(t, m, `{"stream":true,"messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"sessions_list"}}]}`)
	if tool != "sessions_list" || !done || text == "" {
		t.Fatalf("first call: text %q tool %q done %t", text, tool, done)
	}
	text, tool, done, chunks := stream(t, m, `{"stream":true,"messages":[{"role":"user","content":"go"},{"role":"tool","content":"[]"}]}`)
	if tool != "" || !done || text != answer {
		t.Fatalf("after the tool: text %q tool %q done %t", text, tool, done)
	}
	if chunks != len(strings.Fields(answer)) {
		t.Fatalf("the answer came in %d chunks, want one a word (%d)", chunks, len(strings.Fields(answer)))
	}
	if took := time.Since(start); took < time.Duration(chunks-1)*pace {
		t.Fatalf("the answer streamed in %v, faster than its pace allows", took)
	}

	c := config.Default()
	Configure(c)
	AddStreamingAgent(c, m)
	if len(c.Agents.List) != 2 || c.Agents.List[1].ID != StreamingAgent || c.Agents.List[1].OpenAI["baseURL"] != m.BaseURL() {
		t.Fatalf("the demo's agents: %+v", c.Agents.List)
	}
	own := config.Default()
	own.Agents.List = []config.Agent{{ID: "mine", Runtime: "script"}}
	Configure(own)
	AddStreamingAgent(own, m)
	if len(own.Agents.List) != 1 {
		t.Fatalf("a config with its own agents got the demo's: %+v", own.Agents.List)
	}
}
