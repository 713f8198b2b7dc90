package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

const testKey = "sk-test-0123456789abcdef"

// stub is an httptest chat-completions endpoint: it records every request
// and answers the n-th with respond(n, body).
type stub struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	paths   []string
}

func newStub(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *stub {
	s := &stub{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request body is not JSON: %v: %s", err, raw)
		}
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, body)
		s.headers = append(s.headers, r.Header.Clone())
		s.paths = append(s.paths, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		respond(n, w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stub) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

func (s *stub) body(n int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[n]
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func toolCallResponse(id, name, args string) map[string]any {
	return map[string]any{"choices": []any{map[string]any{
		"message": map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{map[string]any{
				"id": id, "type": "function",
				"function": map[string]any{"name": name, "arguments": args},
			}},
		},
		"finish_reason": "tool_calls",
	}}}
}

func textResponse(content string) map[string]any {
	return map[string]any{"choices": []any{map[string]any{
		"message":       map[string]any{"role": "assistant", "content": content},
		"finish_reason": "stop",
	}}}
}

func openAIAgent(t *testing.T, baseURL string, extra map[string]any) config.Agent {
	t.Helper()
	t.Setenv("TEST_OPENAI_KEY", testKey)
	m := map[string]any{"baseURL": baseURL, "model": "gpt-test", "apiKeyEnv": "TEST_OPENAI_KEY"}
	for k, v := range extra {
		m[k] = v
	}
	return config.Agent{ID: "research", Runtime: "openai", OpenAI: m}
}

func TestOpenAIToolCallThenAnswer(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeJSON(w, toolCallResponse("call_1", "sessions_list", `{"limit":5,"kinds":["main"]}`))
			return
		}
		writeJSON(w, textResponse("There is one session: main."))
	})
	rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1/", map[string]any{"systemPrompt": "You are research."}))
	tools := &fakeTools{results: map[string]string{"sessions_list": `{"count":1,"sessions":[{"key":"main"}]}`}}
	turn := Turn{
		SessionKey: "agent:research:main", Message: "list sessions",
		Prompt:            "[Inter-session message isUser=false]\nlist sessions",
		ExtraSystemPrompt: "Agent-to-agent message context:\nfrom agent:main:main",
		History: []json.RawMessage{
			json.RawMessage(`{"role":"user","content":"hello"}`),
			json.RawMessage(`{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"hi there"},{"type":"thinking","thinking":"x"}]}}`),
			json.RawMessage(`{"role":"toolResult","content":"dropped"}`),
			json.RawMessage(`not json`),
			// The gateway may already have stored this turn's prompt.
			json.RawMessage(`{"role":"user","content":"[Inter-session message isUser=false]\nlist sessions"}`),
		},
	}
	res, err := rt.Run(context.Background(), turn, tools)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "There is one session: main." {
		t.Fatalf("reply %q", res.Reply)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "sessions_list" || res.ToolCalls[0].Err != "" {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	jsonEqual(t, res.ToolCalls[0].Params, `{"limit":5,"kinds":["main"]}`)
	jsonEqual(t, res.ToolCalls[0].Result, `{"count":1,"sessions":[{"key":"main"}]}`)
	if len(tools.calls) != 1 {
		t.Fatalf("Tools called %d times", len(tools.calls))
	}
	jsonEqual(t, tools.calls[0].Params, `{"limit":5,"kinds":["main"]}`)

	if s.requests() != 2 {
		t.Fatalf("%d requests, want 2", s.requests())
	}
	for i := range 2 {
		if s.paths[i] != "POST /v1/chat/completions" {
			t.Fatalf("request %d: %s", i, s.paths[i])
		}
		if got := s.headers[i].Get("Authorization"); got != "Bearer "+testKey {
			t.Fatalf("request %d: Authorization %q", i, got)
		}
		if got := s.headers[i].Get("Content-Type"); got != "application/json" {
			t.Fatalf("request %d: Content-Type %q", i, got)
		}
	}
	first := s.body(0)
	if first["model"] != "gpt-test" {
		t.Fatalf("model %v", first["model"])
	}
	var names []string
	for _, tool := range first["tools"].([]any) {
		tm := tool.(map[string]any)
		fn := tm["function"].(map[string]any)
		if tm["type"] != "function" || fn["description"] == "" || fn["parameters"].(map[string]any)["type"] != "object" {
			t.Fatalf("malformed tool %v", tm)
		}
		names = append(names, fn["name"].(string))
	}
	want := []string{"sessions_list", "sessions_history", "sessions_search", "sessions_send", "sessions_spawn", "sessions_yield", "subagents", "session_status", "agents_list"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	spawn := first["tools"].([]any)[4].(map[string]any)["function"].(map[string]any)["parameters"].(map[string]any)
	if req := spawn["required"].([]any); len(req) != 1 || req[0] != "task" {
		t.Fatalf("sessions_spawn required %v", req)
	}
	jsonEqual(t, mustJSON(first["messages"]), `[
		{"role":"system","content":"You are research.\n\nAgent-to-agent message context:\nfrom agent:main:main"},
		{"role":"user","content":"hello"},
		{"role":"assistant","content":"hi there"},
		{"role":"user","content":"[Inter-session message isUser=false]\nlist sessions"}
	]`)
	second := s.body(1)["messages"].([]any)
	if len(second) != 6 {
		t.Fatalf("second request has %d messages: %v", len(second), second)
	}
	jsonEqual(t, mustJSON(second[4]), `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"sessions_list","arguments":"{\"limit\":5,\"kinds\":[\"main\"]}"}}]}`)
	jsonEqual(t, mustJSON(second[5]), `{"role":"tool","tool_call_id":"call_1","content":"{\"count\":1,\"sessions\":[{\"key\":\"main\"}]}"}`)
}

func TestOpenAIHTTPErrorNeverEchoesKey(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		// A careless proxy that echoes the credentials it got.
		fmt.Fprintf(w, `{"error":{"message":"upstream exploded for %s","type":"server_error"}}`, r.Header.Get("Authorization"))
	})
	res, err := mustNew(t, openAIAgent(t, s.srv.URL, nil)).Run(context.Background(), Turn{Prompt: "hi"}, &fakeTools{})
	if res != nil {
		t.Fatalf("got result %+v", res)
	}
	re := asRunError(t, err)
	wantErrContains(t, re, "HTTP 500 Internal Server Error", "upstream exploded for Bearer [redacted]", s.srv.URL+"/chat/completions")
	if strings.Contains(re.Message, testKey) {
		t.Fatalf("error echoes the API key: %s", re.Message)
	}
	if s.requests() != 1 {
		t.Fatalf("%d requests; an HTTP error must not be retried here", s.requests())
	}
}

func TestOpenAIHTTPErrorExcerptIsShort(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>\n"+strings.Repeat("<p>gateway trouble</p>\n", 500)+"</html>")
	})
	_, err := mustNew(t, openAIAgent(t, s.srv.URL, nil)).Run(context.Background(), Turn{Prompt: "hi"}, nil)
	wantErrContains(t, err, "HTTP 502 Bad Gateway: <html> <p>gateway trouble</p>")
	if len(err.Error()) > bodyExcerpt+200 || strings.Contains(err.Error(), "\n") {
		t.Fatalf("excerpt too long or multi-line (%d bytes)", len(err.Error()))
	}
}

func TestOpenAIToolLoopBound(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, toolCallResponse(fmt.Sprintf("call_%d", n), "session_status", `{}`))
	})
	tools := &fakeTools{}
	res, err := mustNew(t, openAIAgent(t, s.srv.URL, map[string]any{"maxToolRounds": 3})).Run(context.Background(), Turn{Prompt: "loop"}, tools)
	wantErrContains(t, asRunError(t, err), "tool loop bound hit", "after 3 rounds (openai.maxToolRounds)")
	if s.requests() != 4 || len(tools.calls) != 3 {
		t.Fatalf("%d requests and %d tool calls; want 4 and 3", s.requests(), len(tools.calls))
	}
	if res == nil || len(res.ToolCalls) != 3 {
		t.Fatalf("the failed turn should report its 3 tool calls: %+v", res)
	}
}

func TestOpenAIDefaultToolLoopBound(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, toolCallResponse(fmt.Sprintf("call_%d", n), "sessions_list", `{}`))
	})
	_, err := mustNew(t, openAIAgent(t, s.srv.URL, nil)).Run(context.Background(), Turn{Prompt: "loop"}, &fakeTools{})
	wantErrContains(t, err, "tool loop bound hit", "after 8 rounds")
	if s.requests() != defaultMaxToolRounds+1 {
		t.Fatalf("%d requests", s.requests())
	}
}

// Mistakes in a tool call are the model's to fix: it gets the error as the
// tool result and the loop goes on.
func TestOpenAIBadToolCallsAreFedBack(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 0:
			writeJSON(w, map[string]any{"choices": []any{map[string]any{"message": map[string]any{
				"role": "assistant", "content": "Let me look.",
				"tool_calls": []any{
					map[string]any{"id": "a", "type": "function", "function": map[string]any{"name": "delete_everything", "arguments": "{}"}},
					map[string]any{"id": "b", "type": "function", "function": map[string]any{"name": "sessions_history", "arguments": "{not json"}},
					// No id, arguments as an object: both seen from compatible servers.
					map[string]any{"type": "function", "function": map[string]any{"name": "sessions_history", "arguments": map[string]any{"sessionKey": "main"}}},
					map[string]any{"id": "d", "type": "function", "function": map[string]any{"name": "sessions_send", "arguments": `{"message":"x"}`}},
				},
			}}}})
		default:
			writeJSON(w, textResponse("ok"))
		}
	})
	tools := ToolsFunc(func(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error) {
		if tool == "sessions_send" {
			return nil, errors.New("sessionKey, label or agentId required")
		}
		return json.RawMessage(`{"messages":[]}`), nil
	})
	res, err := mustNew(t, openAIAgent(t, s.srv.URL, nil)).Run(context.Background(), Turn{Prompt: "go"}, tools)
	if err != nil || res.Reply != "ok" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if len(res.ToolCalls) != 4 {
		t.Fatalf("calls %+v", res.ToolCalls)
	}
	if !strings.Contains(res.ToolCalls[0].Err, `unknown tool "delete_everything"`) ||
		!strings.Contains(res.ToolCalls[1].Err, "arguments are not a JSON object") ||
		res.ToolCalls[2].Err != "" || string(res.ToolCalls[2].Params) != `{"sessionKey":"main"}` ||
		res.ToolCalls[3].Err != "sessionKey, label or agentId required" {
		t.Fatalf("calls %+v", res.ToolCalls)
	}
	msgs := s.body(1)["messages"].([]any)
	// user, assistant(tool_calls), 4 tool results
	if len(msgs) != 6 {
		t.Fatalf("%d messages: %v", len(msgs), msgs)
	}
	am := msgs[1].(map[string]any)
	if am["content"] != "Let me look." {
		t.Fatalf("assistant content %v", am["content"])
	}
	ids := []string{}
	for _, c := range am["tool_calls"].([]any) {
		ids = append(ids, c.(map[string]any)["id"].(string))
	}
	for i, m := range msgs[2:] {
		tm := m.(map[string]any)
		if tm["role"] != "tool" || tm["tool_call_id"] != ids[i] || ids[i] == "" {
			t.Fatalf("tool message %d: %v (ids %v)", i, tm, ids)
		}
	}
	if c := msgs[2].(map[string]any)["content"].(string); !strings.Contains(c, `"status":"error"`) || !strings.Contains(c, "unknown tool") {
		t.Fatalf("error result %s", c)
	}
	if c := msgs[5].(map[string]any)["content"].(string); !strings.Contains(c, "sessionKey, label or agentId required") {
		t.Fatalf("thrown tool error not fed back: %s", c)
	}
}

func TestOpenAITimeout(t *testing.T) {
	release := make(chan struct{})
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	_, err := mustNew(t, openAIAgent(t, s.srv.URL, map[string]any{"timeoutSeconds": 1})).Run(context.Background(), Turn{Prompt: "hi"}, nil)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	wantErrContains(t, err, "no response within 1s (openai.timeoutSeconds)")
}

func TestOpenAICancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	})
	_, err := mustNew(t, openAIAgent(t, s.srv.URL, nil)).Run(ctx, Turn{Prompt: "hi"}, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestOpenAIMalformedResponses(t *testing.T) {
	cases := map[string]struct {
		body string
		want string
	}{
		"not json":    {`<html>oops</html>`, "response is not chat-completions JSON"},
		"no choices":  {`{"choices":[]}`, "response has no choices"},
		"error in ok": {`{"error":{"message":"model not loaded"}}`, "endpoint error: model not loaded"},
		"bad calls":   {`{"choices":[{"message":{"tool_calls":"nope"}}]}`, "response tool_calls are malformed"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) { io.WriteString(w, c.body) })
			_, err := mustNew(t, openAIAgent(t, s.srv.URL, nil)).Run(context.Background(), Turn{Prompt: "hi"}, nil)
			wantErrContains(t, asRunError(t, err), c.want)
		})
	}
}

func TestOpenAINoKeyNoSystemPrompt(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": nil}}}})
	})
	a := config.Agent{ID: "local", Runtime: "openai", OpenAI: map[string]any{"baseURL": s.srv.URL, "model": "llama"}}
	res, err := mustNew(t, a).Run(context.Background(), Turn{Message: "only the message"}, nil)
	if err != nil || res.Reply != "" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if h := s.headers[0].Get("Authorization"); h != "" {
		t.Fatalf("Authorization %q without apiKeyEnv", h)
	}
	jsonEqual(t, mustJSON(s.body(0)["messages"]), `[{"role":"user","content":"only the message"}]`)
}

// openai.apiKeyFile keeps the key out of the gateway's environment (where
// same-user processes could read it): the key is read from the file at each
// turn, so a rotated key is sent without a restart, and an emptied file
// fails the turn without sending anything.
func TestOpenAIKeyFile(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) { writeJSON(w, textResponse("ok")) })
	file := filepath.Join(t.TempDir(), "openai.key")
	if err := os.WriteFile(file, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := mustNew(t, config.Agent{ID: "research", Runtime: "openai", OpenAI: map[string]any{"baseURL": s.srv.URL, "model": "m", "apiKeyFile": file}})
	if _, err := rt.Run(context.Background(), Turn{Message: "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("sk-rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Run(context.Background(), Turn{Message: "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	if a, b := s.headers[0].Get("Authorization"), s.headers[1].Get("Authorization"); a != "Bearer sk-from-file" || b != "Bearer sk-rotated" {
		t.Fatalf("Authorization %q then %q, want the file's key each turn", a, b)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := rt.Run(context.Background(), Turn{Message: "hi"}, nil)
	wantErrContains(t, asRunError(t, err), "(openai.apiKeyFile) is empty")
	if len(s.headers) != 2 {
		t.Fatalf("%d requests, want none after the key file emptied", len(s.headers))
	}
}

func TestOpenAIThroughConfig(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) { writeJSON(w, textResponse("hi")) })
	t.Setenv("RESEARCH_KEY", testKey)
	agents := loadAgents(t, `
agents:
  list:
    - id: research
      runtime: openai
      openai: {baseURL: "`+s.srv.URL+`/v1", model: "gpt-x", apiKeyEnv: "RESEARCH_KEY", maxToolRounds: 2, timeoutSeconds: 30, systemPrompt: "Be brief."}
`)
	res, err := mustNew(t, agents["research"]).Run(context.Background(), Turn{Prompt: "hello"}, nil)
	if err != nil || res.Reply != "hi" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if s.body(0)["model"] != "gpt-x" || s.headers[0].Get("Authorization") != "Bearer "+testKey || s.paths[0] != "POST /v1/chat/completions" {
		t.Fatalf("request %v %v %v", s.body(0)["model"], s.headers[0], s.paths[0])
	}
}

func TestOpenAIConfigErrors(t *testing.T) {
	t.Setenv("SET_KEY", "x")
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"baseURL": "http://127.0.0.1:1/v1", "model": "m"}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	cases := []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"no baseURL", base(map[string]any{"baseURL": nil}), "agents.list[research].openai.baseURL: required"},
		{"not a URL", base(map[string]any{"baseURL": "localhost:8080"}), `agents.list[research].openai.baseURL: "localhost:8080" is not an http(s) URL`},
		{"full endpoint", base(map[string]any{"baseURL": "http://h/v1/chat/completions"}), `agents.list[research].openai.baseURL: give the API root without /chat/completions (it is appended), e.g. "http://h/v1"`},
		{"password hidden", base(map[string]any{"baseURL": "ftp://user:hunter2@h/v1"}), `"ftp://user:xxxxx@h/v1" is not an http(s) URL`},
		{"no model", base(map[string]any{"model": nil}), "agents.list[research].openai.model: required"},
		{"key pasted", base(map[string]any{"apiKeyEnv": "sk-live-abc123"}), "agents.list[research].openai.apiKeyEnv: must name the environment variable that holds the key (e.g. OPENAI_API_KEY), not the key itself"},
		{"key unset", base(map[string]any{"apiKeyEnv": "SURELY_UNSET_KEY_VAR"}), "agents.list[research].openai.apiKeyEnv: environment variable SURELY_UNSET_KEY_VAR is not set or empty"},
		{"env and file", base(map[string]any{"apiKeyEnv": "SET_KEY", "apiKeyFile": "/nonexistent"}), "agents.list[research].openai: set apiKeyEnv or apiKeyFile, not both"},
		{"key file missing", base(map[string]any{"apiKeyFile": "/nonexistent/key"}), "agents.list[research].openai.apiKeyFile: read the key file (openai.apiKeyFile): open /nonexistent/key: no such file or directory"},
		{"zero rounds", base(map[string]any{"apiKeyEnv": "SET_KEY", "maxToolRounds": 0}), "agents.list[research].openai.maxToolRounds: must be 1 or more, got 0"},
		{"zero timeout", base(map[string]any{"timeoutSeconds": -1}), "agents.list[research].openai.timeoutSeconds: must be 1 or more, got -1"},
		{"typo", base(map[string]any{"baseUrl2": "x"}), "agents.list[research].openai: unknown key(s) baseUrl2 (known: baseURL, model, apiKeyEnv, apiKeyFile, maxToolRounds, timeoutSeconds, systemPrompt)"},
		{"model not string", base(map[string]any{"model": []any{"a"}}), "agents.list[research].openai.model: must be a string, got a list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt, err := New(config.Agent{ID: "research", Runtime: "openai", OpenAI: c.cfg})
			if rt != nil {
				t.Fatal("got a runtime with an error")
			}
			wantErrContains(t, err, c.want)
			if strings.Contains(err.Error(), "sk-live-abc123") || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("secret echoed: %v", err)
			}
			t.Log(err)
		})
	}
}

// Turn.Model (a session's override) replaces the configured model.
func TestOpenAITurnModel(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) { writeJSON(w, textResponse("ok")) })
	rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1", nil))
	for _, tc := range []struct{ model, want string }{{"gpt-override", "gpt-override"}, {"", "gpt-test"}} {
		if _, err := rt.Run(context.Background(), Turn{Message: "hi", Model: tc.model}, nil); err != nil {
			t.Fatal(err)
		}
		if got := s.body(s.requests() - 1)["model"]; got != tc.want {
			t.Errorf("Turn.Model %q: asked for %v, want %s", tc.model, got, tc.want)
		}
	}
}
