package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelCatalog: OpenClaw's models.providers section loads as it is
// (keys sessionbus does not read ignored); a model is found under its
// provider or, bare, under any; an unlisted one gets the defaults; the
// reserve is max(reserveTokens, floor), at most half the window.
func TestModelCatalog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "openclaw.json")
	if err := os.WriteFile(path, []byte(`{
  models: { mode: "merge", providers: {
    local: { baseUrl: "http://127.0.0.1:8080/v1", apiKey: "x", api: "openai-completions",
      models: [ { id: "qwen-7b", name: "Qwen", contextWindow: 32768, maxTokens: 4096,
                  cost: { input: 0.5, output: 1.5, cacheRead: 0.1, cacheWrite: 0 } } ] } } },
  agents: { defaults: { compaction: { reserveTokens: 1000, keepRecentTokens: 500, reserveTokensFloor: 0 } } },
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"local/qwen-7b", "qwen-7b", "LOCAL/Qwen-7B"} {
		l := c.ModelLimits(ref)
		if !l.Known || l.ContextWindow != 32768 || l.MaxTokens != 4096 || l.Cost.Output != 1.5 || !l.Cost.Priced() {
			t.Fatalf("%s: %+v", ref, l)
		}
	}
	if l := c.ModelLimits("openai/unknown"); l.Known || l.ContextWindow != DefaultContextWindow || l.MaxTokens != DefaultMaxTokens || l.Cost.Priced() {
		t.Fatalf("unknown model: %+v", l)
	}
	cp := c.Agents.Defaults.Compaction
	if cp.Reserve(32768) != 1000 || cp.Reserve(1000) != 500 || cp.KeepRecentTokens != 500 {
		t.Fatalf("compaction %+v reserve %d", cp, cp.Reserve(32768))
	}
	d := Default().Agents.Defaults.Compaction
	if d.Reserve(DefaultContextWindow) != DefaultReserveTokensFloor || d.KeepRecentTokens != DefaultKeepRecentTokens {
		t.Fatalf("defaults %+v", d)
	}
}

// TestModelCatalogErrors: a model without an id and negative numbers
// refuse to start, naming the key.
func TestModelCatalogErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"models: {providers: {p: {models: [{contextWindow: 10}]}}}", "models.providers.p.models[0].id: required"},
		{"models: {providers: {p: {models: [{id: m, contextWindow: -1}]}}}", "models.providers.p.models[0].contextWindow: must be 0"},
		{"models: {providers: {p: {models: [{id: m, cost: {input: -1}}]}}}", "models.providers.p.models[0].cost"},
		{"agents: {defaults: {compaction: {keepRecentTokens: -5}}}", "agents.defaults.compaction.keepRecentTokens: must be 0 or more"},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
