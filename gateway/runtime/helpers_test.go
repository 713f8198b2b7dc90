package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/config/configtest"
)

// fakeTools records every call and answers from results (by tool name), or
// with err when set.
type fakeTools struct {
	mu      sync.Mutex
	calls   []ToolCall
	results map[string]string
	err     error
}

func (f *fakeTools) Call(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, ToolCall{Name: tool, Params: append(json.RawMessage(nil), params...)})
	if f.err != nil {
		return nil, f.err
	}
	if r, ok := f.results[tool]; ok {
		return json.RawMessage(r), nil
	}
	return json.RawMessage(`{"status":"ok"}`), nil
}

// loadAgents runs YAML through the real config loader, so tests see what
// viper really hands over (every nested key folded to lower case).
func loadAgents(t *testing.T, yaml string) map[string]config.Agent {
	t.Helper()
	c, _ := configtest.Load(t, "", "sessionbus.yaml", yaml)
	out := map[string]config.Agent{}
	for _, a := range c.Agents.List {
		out[a.ID] = a
	}
	return out
}

func mustNew(t *testing.T, a config.Agent) Runtime {
	t.Helper()
	rt, err := New(a)
	if err != nil {
		t.Fatalf("New(%s): %v", a.ID, err)
	}
	return rt
}

func wantErrContains(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got nil", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func asRunError(t *testing.T, err error) *RunError {
	t.Helper()
	var re *RunError
	if !errors.As(err, &re) {
		t.Fatalf("want *RunError, got %T: %v", err, err)
	}
	return re
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("JSON mismatch\n got: %s\nwant: %s", gb, wb)
	}
}
