package rules

import (
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

// The session's model for the provider stage: the override (its provider
// kept whole even when the model id holds a slash), else the agent's
// default model.
func TestSessionToolContextModel(t *testing.T) {
	cfg := config.Default()
	cfg.Agents.Defaults.Model = "gpt-4o-mini"
	key := "agent:main:x"
	for _, tc := range []struct {
		provider, model, wantP, wantM string
	}{
		{"", "", "openai", "gpt-4o-mini"},
		{"openrouter", "anthropic/claude-sonnet-4-5", "openrouter", "anthropic/claude-sonnet-4-5"},
		{"", "anthropic/claude-opus-4-6", "anthropic", "claude-opus-4-6"},
	} {
		c := SessionToolContext(cfg, key, SessionFacts{ProviderOverride: tc.provider, ModelOverride: tc.model}, false, "")
		if c.Provider != tc.wantP || c.Model != tc.wantM {
			t.Errorf("override %q %q: %s/%s, want %s/%s", tc.provider, tc.model, c.Provider, c.Model, tc.wantP, tc.wantM)
		}
	}
}

// The sandbox stage's default deny list spares what an explicit allow
// names, and an explicit deny replaces it.
func TestSandboxStageDefaults(t *testing.T) {
	cfg := config.Default()
	cfg.Tools.Sandbox.Tools.AlsoAllow = []string{"cron"}
	st := sandboxStage(cfg, "main")
	if matchAny(st.Deny, "cron") || !matchAny(st.Deny, "gateway") || !matchAny(st.Allow, "cron") || matchAny(st.Allow, "agents_list") {
		t.Fatalf("stage %+v", st)
	}
	cfg.Tools.Sandbox.Tools.Deny = []string{}
	if st := sandboxStage(cfg, "main"); len(st.Deny) != 0 || st.DenyKey != "tools.sandbox.tools.deny" {
		t.Fatalf("an empty deny must deny nothing: %+v", st)
	}
}
