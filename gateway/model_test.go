package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The model a session_status call set is the one the next turn asks the
// endpoint for, and a reset brings back the agent's own; the second turn
// runs on the same gateway, so a kept copy of the entry would show.
func TestTurnUsesSessionModelOverride(t *testing.T) {
	var mu sync.Mutex
	var models []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		models = append(models, body.Model)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`))
	}))
	t.Cleanup(srv.Close)

	e := newEnv(t)
	e.cfg.Agents.List = append(e.cfg.Agents.List,
		config.Agent{ID: "llm", Runtime: "openai", OpenAI: map[string]any{"baseURL": srv.URL + "/v1", "model": "gpt-own"}},
		config.Agent{ID: "pinned", Runtime: "openai", Model: "openai/gpt-pinned", OpenAI: map[string]any{"baseURL": srv.URL + "/v1", "model": "gpt-own"}})
	e.gateway("g1", Options{})
	store, err := sessions.Open(context.Background(), e.js, e.names)
	if err != nil {
		t.Fatal(err)
	}
	key := "agent:llm:main"
	if _, err := store.Create(context.Background(), &sessions.Entry{Key: key, AgentID: "llm", Rare: &sessions.RareFields{ProviderOverride: "openai", ModelOverride: "gpt-4.1"}}); err != nil {
		t.Fatal(err)
	}
	turn := func(session, agent string) {
		t.Helper()
		req := e.request(session, agent, "hi")
		e.submit(req)
		if rec := e.wait(req.RunID); rec.Status != runs.OK {
			t.Fatalf("run: %+v", rec)
		}
	}
	turn(key, "llm")
	if _, _, err := store.Update(context.Background(), key, func(x *sessions.Entry) error {
		x.SetRare(func(r *sessions.RareFields) { r.ProviderOverride, r.ModelOverride = "", "" })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	turn(key, "llm")
	turn("agent:pinned:main", "pinned")
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"gpt-4.1", "gpt-own", "gpt-pinned"}; len(models) != 3 || models[0] != want[0] || models[1] != want[1] || models[2] != want[2] {
		t.Fatalf("models asked for: %v, want %v", models, want)
	}
}
