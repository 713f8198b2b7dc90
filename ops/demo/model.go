package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The demo model: a small OpenAI-compatible chat-completions endpoint in
// the demo's own process, so `serve --demo` has an agent whose turns take
// seconds, stream their text a word at a time and call a tool, as a real
// model's do. The console then shows live output, Kill and Steer on turns
// that are really running. It answers from the request alone (no state):
// a turn's first call lists the sessions (a tool call) when the tool is
// offered, and the call after the tool's result writes the answer.

// StreamingAgent is the demo's agent whose turns the demo model runs.
const StreamingAgent = "writer"

// DefaultPace is how long the demo model takes per streamed word.
const DefaultPace = 120 * time.Millisecond

// Model is a running demo model.
type Model struct {
	srv  *http.Server
	ln   net.Listener
	pace time.Duration
}

// StartModel serves the demo model on loopback, streaming a word every
// pace (0: DefaultPace).
func StartModel(pace time.Duration) (*Model, error) {
	if pace <= 0 {
		pace = DefaultPace
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo model: %w", err)
	}
	m := &Model{ln: ln, pace: pace}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.complete)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// BaseURL is the API root to give an openai agent (openai.baseURL).
func (m *Model) BaseURL() string { return "http://" + m.ln.Addr().String() + "/v1" }

// Close stops the model; turns streaming from it end with an error.
func (m *Model) Close() { _ = m.srv.Close() }

// AddStreamingAgent adds the agent the demo model runs to the config
// Configure made (a config that lists its own agents is left as it is,
// as Configure leaves it). Its sessions spawn children of their own agent,
// so the scripted scenario's tree under agent:main:main stays as it was.
func AddStreamingAgent(c *config.Config, m *Model) {
	if len(c.Agents.List) != 1 || c.Agents.List[0].Name != demoMainName {
		return
	}
	c.Agents.List = append(c.Agents.List, config.Agent{ID: StreamingAgent, Name: "demo writer (a streaming model)", Runtime: "openai",
		Model: "demo/streamer", OpenAI: map[string]any{"baseURL": m.BaseURL(), "model": "demo-streamer"}})
}

type modelRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// answer is what the model says after the tool's result.
const answer = "Here is the plan. First, I read the sessions this agent can see, so nothing is done twice. " +
	"Then I draft the release notes section by section: what changed, why it matters, and what to do when upgrading. " +
	"Each section gets a short example, and the breaking changes come first, in bold. " +
	"Finally, I check every link and hand the draft back to whoever asked for it. Done."

func (m *Model) complete(w http.ResponseWriter, r *http.Request) {
	var req modelRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"send a chat-completions request with messages"}}`, http.StatusBadRequest)
		return
	}
	last := req.Messages[len(req.Messages)-1]
	offered := false
	for _, t := range req.Tools {
		offered = offered || t.Function.Name == "sessions_list"
	}
	var text string
	var call bool
	switch {
	case last.Role == "tool":
		text = answer
	case offered:
		text, call = "Let me look at the sessions first.", true
	default:
		text = answer
	}
	if !req.Stream {
		m.whole(w, r.Context(), text, call)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	for i, word := range strings.SplitAfter(text, " ") {
		if i > 0 && bus.Sleep(r.Context(), m.pace) != nil {
			return // the turn was stopped or killed
		}
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": word}}}})
	}
	finish := "stop"
	if call {
		finish = "tool_calls"
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "call_demo_1", "type": "function", "function": map[string]any{"name": "sessions_list", "arguments": `{"limit":5}`}}}}}}})
	}
	words := int64(len(strings.Fields(text)))
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": 200, "completion_tokens": words * 4 / 3, "total_tokens": 200 + words*4/3}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// whole answers a request that did not ask to stream, after the time the
// stream would have taken.
func (m *Model) whole(w http.ResponseWriter, ctx context.Context, text string, call bool) {
	if bus.Sleep(ctx, time.Duration(len(strings.Fields(text)))*m.pace) != nil {
		return
	}
	msg := map[string]any{"role": "assistant", "content": text}
	if call {
		msg["tool_calls"] = []any{map[string]any{"id": "call_demo_1", "type": "function", "function": map[string]any{"name": "sessions_list", "arguments": `{"limit":5}`}}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": msg}},
		"usage": map[string]any{"prompt_tokens": 200, "completion_tokens": 60, "total_tokens": 260}})
}

// liveWriter spawns a child of the streaming agent from its main session
// (created if absent): its turn streams for seconds, so the console shows
// it running, its live output, and Kill and Steer on it. It returns the
// board's session, "" when the config has no streaming agent.
func liveWriter(ctx context.Context, o Options) (string, error) {
	found := false
	for _, a := range o.Deps.Config.Agents.List {
		found = found || a.ID == StreamingAgent
	}
	if !found {
		return "", nil
	}
	parent := "agent:" + StreamingAgent + ":main"
	now := time.Now().UnixMilli()
	if _, err := o.Deps.Store.Create(ctx, &sessions.Entry{Key: parent, AgentID: StreamingAgent, SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now}); err != nil && !errors.Is(err, sessions.ErrExists) {
		return "", fmt.Errorf("create %s: %w", parent, err)
	}
	if err := o.Deps.Index.Sync(ctx); err != nil {
		return "", err
	}
	res, err := call(ctx, o, parent, "sessions_spawn", `{"task":"draft the v2 release notes, section by section","label":"release-notes-writer"}`)
	if err != nil {
		return "", fmt.Errorf("spawn the streaming child: %w", err)
	}
	var out struct {
		Status string `json:"status"`
		Child  string `json:"childSessionKey"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(res, &out); err != nil || out.Child == "" {
		return "", fmt.Errorf("spawn the streaming child: %s %s", out.Status, out.Error)
	}
	fmt.Fprintf(o.Out, "\n== a child that takes its time: the demo model streams a word every %v and calls sessions_list\nspawned %s under %s\n", DefaultPace, out.Child, parent)
	return parent, nil
}
