package runtime

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/rules"
)

func offeredTools(t *testing.T, body map[string]any) []string {
	t.Helper()
	raw, ok := body["tools"].([]any)
	if !ok {
		return nil
	}
	var names []string
	for _, x := range raw {
		names = append(names, x.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	return names
}

// A leaf sub-agent is offered only its tool set, and a call outside it is
// fed back without reaching the tools.
func TestOpenAIOffersASubagentOnlyItsTools(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeJSON(w, toolCallResponse("call_1", "sessions_send", `{"message":"hi","sessionKey":"main"}`))
			return
		}
		writeJSON(w, textResponse("done"))
	})
	rt := mustNew(t, openAIAgent(t, s.srv.URL+"/v1", nil))
	cfg := config.Default()
	depth := 1
	leaf := rules.SessionTools(cfg, "agent:research:subagent:x", &depth, rules.RoleLeaf, ToolNames())
	tools := &fakeTools{results: map[string]string{}}
	res, err := rt.Run(context.Background(), Turn{SessionKey: "agent:research:subagent:x", Message: "go", AllowedTools: leaf}, tools)
	if err != nil {
		t.Fatal(err)
	}
	if got := offeredTools(t, s.body(0)); !slices.Equal(got, []string{"sessions_yield"}) {
		t.Fatalf("leaf offered %v, want [sessions_yield]", got)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Err == "" {
		t.Fatalf("a call outside the set must fail: %+v", res.ToolCalls)
	}
	if len(tools.calls) != 0 {
		t.Fatalf("the refused call reached the tools: %v", tools.calls)
	}

	// an orchestrator (maxSpawnDepth 2) gets the orchestration tools back
	cfg.Agents.Defaults.Subagents.MaxSpawnDepth = 2
	orch := rules.SessionTools(cfg, "agent:research:subagent:y", &depth, "", ToolNames())
	_, err = rt.Run(context.Background(), Turn{SessionKey: "agent:research:subagent:y", Message: "go", AllowedTools: orch}, &fakeTools{results: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sessions_list", "sessions_history", "sessions_spawn", "sessions_yield", "subagents"}
	if got := offeredTools(t, s.body(2)); !slices.Equal(got, want) {
		t.Fatalf("orchestrator offered %v, want %v", got, want)
	}

	// a top-level session is offered every tool but the opt-in ones
	if got := rules.SessionTools(cfg, "agent:research:main", nil, "", ToolNames()); len(got) != len(ToolNames())-len(rules.OptInTools) {
		t.Fatalf("a main session is restricted to %v", got)
	}
}
