package runtime

import (
	"context"
	"net/http"
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

const yielded = `{"status":"yielded","message":"Turn yielded."}`

func TestYieldedResult(t *testing.T) {
	for _, tt := range []struct {
		tool, result string
		want         bool
	}{
		{"sessions_yield", yielded, true},
		{"sessions_yield", `{"status":"error","error":"Yield not supported in this context"}`, false},
		{"sessions_yield", ``, false},
		{"sessions_yield", `not json`, false},
		{"sessions_list", yielded, false},
	} {
		if got := Yielded(tt.tool, []byte(tt.result)); got != tt.want {
			t.Errorf("Yielded(%s, %s) = %v", tt.tool, tt.result, got)
		}
	}
}

// The yield rule form and a plain sessions_yield tool rule both end the
// turn without a reply when the yield is accepted; a refused yield leaves
// the turn to its reply.
func TestScriptYieldRule(t *testing.T) {
	agents := loadAgents(t, `
agents:
  list:
    - id: main
      script:
        rules:
          - match: "^wait for (.*)"
            yield: "waiting for {{1}}"
            reply: "could not yield"
          - match: "^plain$"
            yield: ""
          - match: "^tool$"
            tool: {name: sessions_yield}
            reply: "refused"
`)
	rt := mustNew(t, agents["main"])
	tools := &fakeTools{results: map[string]string{"sessions_yield": yielded}}
	res, err := rt.Run(context.Background(), Turn{Message: "wait for the children"}, tools)
	if err != nil || !res.Yielded || res.Reply != "" || len(res.ToolCalls) != 1 {
		t.Fatalf("yield rule: %+v %v", res, err)
	}
	jsonEqual(t, tools.calls[0].Params, `{"message":"waiting for the children"}`)
	if res, err = rt.Run(context.Background(), Turn{Message: "plain"}, tools); err != nil || !res.Yielded {
		t.Fatalf("plain yield: %+v %v", res, err)
	}
	jsonEqual(t, tools.calls[1].Params, `{}`)
	if res, err = rt.Run(context.Background(), Turn{Message: "tool"}, tools); err != nil || !res.Yielded || res.Reply != "" {
		t.Fatalf("tool yield: %+v %v", res, err)
	}

	refused := &fakeTools{results: map[string]string{"sessions_yield": `{"status":"error","error":"Yield not supported in this context"}`}}
	if res, err = rt.Run(context.Background(), Turn{Message: "wait for x"}, refused); err != nil || res.Yielded || res.Reply != "could not yield" {
		t.Fatalf("refused yield: %+v %v", res, err)
	}
	if res, err = rt.Run(context.Background(), Turn{Message: "tool"}, refused); err != nil || res.Yielded || res.Reply != "refused" {
		t.Fatalf("refused tool yield: %+v %v", res, err)
	}
}

func TestScriptYieldRuleConfigErrors(t *testing.T) {
	y := "x"
	for _, tt := range []struct {
		rule map[string]any
		want string
	}{
		{map[string]any{"yield": y, "tool": map[string]any{"name": "sessions_list"}}, "agents.list[a].script.rules[0]: yield and tool are exclusive"},
		{map[string]any{"yield": y, "error": "boom"}, "agents.list[a].script.rules[0]: yield and error are exclusive"},
		{map[string]any{"match": "^x$", "yield": "{{2}}"}, "agents.list[a].script.rules[0].yield.message: uses {{2}}"},
	} {
		_, err := New(config.Agent{ID: "a", Script: map[string]any{"rules": []any{tt.rule}}})
		wantErrContains(t, err, tt.want)
	}
}

// The openai runtime stops its tool loop on an accepted yield: no further
// completion is requested and calls after the yield are not run.
func TestOpenAIEndsTurnOnYield(t *testing.T) {
	s := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant",
			"tool_calls": []any{
				map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "sessions_yield", "arguments": `{"message":"wait"}`}},
				map[string]any{"id": "c2", "type": "function", "function": map[string]any{"name": "sessions_list", "arguments": `{}`}},
			},
		}}}})
	})
	tools := &fakeTools{results: map[string]string{"sessions_yield": yielded}}
	res, err := mustNew(t, openAIAgent(t, s.srv.URL, nil)).Run(context.Background(), Turn{Prompt: "spawn and wait"}, tools)
	if err != nil || !res.Yielded || res.Reply != "" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if s.requests() != 1 || len(tools.calls) != 1 || tools.calls[0].Name != "sessions_yield" {
		t.Fatalf("%d requests, calls %+v; want 1 request and only the yield", s.requests(), tools.calls)
	}

	// a refused yield is an ordinary tool result: the loop goes on
	s2 := newStub(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeJSON(w, toolCallResponse("c1", "sessions_yield", `{}`))
			return
		}
		writeJSON(w, textResponse("carrying on"))
	})
	refused := &fakeTools{results: map[string]string{"sessions_yield": `{"status":"error","error":"Yield not supported in this context"}`}}
	res, err = mustNew(t, openAIAgent(t, s2.srv.URL, nil)).Run(context.Background(), Turn{Prompt: "x"}, refused)
	if err != nil || res.Yielded || res.Reply != "carrying on" {
		t.Fatalf("refused: %+v, %v", res, err)
	}
}
