package runtime

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/rules"
)

// The openai runtime offers the model exactly the set the tool policy
// allows (profile, alsoAllow, allow/deny, per-agent), the same set the
// workers enforce: rules.SessionTools is what the gateway hands a turn.
func TestOpenAIOffersThePolicySet(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) { writeJSON(w, textResponse("done")) })
	rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1", nil))
	all := ToolNames()
	for i, tc := range []struct {
		name string
		key  string
		edit func(*config.Config)
		want []string
	}{
		{"minimal", mainKey, func(c *config.Config) { c.Tools.Profile = "minimal" }, []string{"session_status"}},
		{"messaging", mainKey, func(c *config.Config) { c.Tools.Profile = "messaging" },
			[]string{"sessions_list", "sessions_history", "sessions_send", "session_status"}},
		{"messaging + alsoAllow", mainKey, func(c *config.Config) {
			c.Tools.Profile = "messaging"
			c.Tools.AlsoAllow = []string{"sessions_spawn", "sessions_yield", "subagents"}
		}, []string{"sessions_list", "sessions_history", "sessions_send", "session_status", "sessions_spawn", "sessions_yield", "subagents"}},
		{"coding", mainKey, func(c *config.Config) { c.Tools.Profile = "coding" },
			[]string{"sessions_list", "sessions_history", "sessions_send", "session_status", "sessions_spawn", "sessions_yield", "subagents"}},
		{"deny group", mainKey, func(c *config.Config) { c.Tools.Deny = []string{"group:sessions"} }, []string{"agents_list"}},
		{"per-agent allow", "agent:ops:main", func(c *config.Config) {
			c.Agents.List = []config.Agent{{ID: "ops", Tools: &config.AgentTools{Allow: []string{"sessions_list", "sessions_history"}}}}
		}, []string{"sessions_list", "sessions_history"}},
		{"per-agent deny everything", "agent:ops:main", func(c *config.Config) {
			c.Agents.List = []config.Agent{{ID: "ops", Tools: &config.AgentTools{Deny: []string{"*"}}}}
		}, nil},
	} {
		cfg := config.Default()
		tc.edit(cfg)
		allowed := rules.SessionTools(cfg, tc.key, nil, "", all)
		// order-insensitive: the runtime keeps its table order
		if !sameSet(allowed, tc.want) {
			t.Fatalf("%s: policy allows %v, want %v", tc.name, allowed, tc.want)
		}
		if _, err := rt.Run(context.Background(), Turn{SessionKey: tc.key, Message: "go", AllowedTools: allowed}, &fakeTools{results: map[string]string{}}); err != nil {
			t.Fatal(err)
		}
		if got := offeredTools(t, s.body(i)); !sameSet(got, tc.want) {
			t.Errorf("%s: offered %v, want %v", tc.name, got, tc.want)
		}
	}
	// the default policy leaves out only the opt-in tools (sessions_search)
	if got := rules.SessionTools(config.Default(), mainKey, nil, "", all); !sameSet(got, slices.DeleteFunc(slices.Clone(all), func(n string) bool { return slices.Contains(rules.OptInTools, n) })) {
		t.Fatalf("the default policy allows a main session %v: want every tool but the opt-in ones", got)
	}
}

const mainKey = "agent:main:main"

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
