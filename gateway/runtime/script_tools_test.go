package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

// A tools list is called in order, each call templated from the message;
// an accepted yield ends the turn and skips the calls after it.
func TestScriptToolsList(t *testing.T) {
	agents := loadAgents(t, `
agents:
  list:
    - id: main
      script:
        rules:
          - match: "^plan (\\w+) and (\\w+)"
            tools:
              - {name: sessions_spawn, params: {task: "{{1}}", label: "{{1}}"}}
              - {name: sessions_spawn, params: {task: "{{2}}", label: "{{2}}"}}
              - {name: sessions_yield, params: {message: "waiting for {{1}} and {{2}}"}}
              - {name: sessions_list}
            reply: "not yielded"
`)
	rt := mustNew(t, agents["main"])
	tools := &fakeTools{results: map[string]string{"sessions_yield": yielded}}
	res, err := rt.Run(context.Background(), Turn{Message: "plan docs and code"}, tools)
	if err != nil || !res.Yielded || res.Reply != "" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if len(tools.calls) != 3 || len(res.ToolCalls) != 3 {
		t.Fatalf("calls %+v, recorded %+v; want the two spawns and the yield, not the list after it", tools.calls, res.ToolCalls)
	}
	jsonEqual(t, tools.calls[0].Params, `{"task":"docs","label":"docs"}`)
	jsonEqual(t, tools.calls[1].Params, `{"task":"code","label":"code"}`)
	jsonEqual(t, tools.calls[2].Params, `{"message":"waiting for docs and code"}`)

	// a refused yield: the list goes on, then the reply
	refused := &fakeTools{results: map[string]string{"sessions_yield": `{"status":"error","error":"Yield not supported in this context"}`}}
	res, err = rt.Run(context.Background(), Turn{Message: "plan a and b"}, refused)
	if err != nil || res.Yielded || res.Reply != "not yielded" || len(refused.calls) != 4 || refused.calls[3].Name != "sessions_list" {
		t.Fatalf("refused yield: %+v %v, calls %+v", res, err, refused.calls)
	}

	// a thrown error in the middle is recorded and the list goes on
	failing := &fakeTools{err: errors.New("task required")}
	res, err = rt.Run(context.Background(), Turn{Message: "plan a and b"}, failing)
	if err != nil || res.Reply != "not yielded" || len(res.ToolCalls) != 4 || res.ToolCalls[0].Err != "task required" {
		t.Fatalf("thrown errors: %+v %v", res, err)
	}
}

// {{result}} is the last tool call's result: compact JSON, a field of it
// (strings unquoted, other values compact JSON, missing ones empty), or the
// thrown error's text.
func TestScriptResultPlaceholder(t *testing.T) {
	rt := mustNew(t, config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"match": "^status (.*)", "tool": map[string]any{"name": "session_status", "params": map[string]any{"sessionKey": "{{1}}"}},
			"reply": "v{{result.stateVersion}} {{ result.stateChanges }} [{{result.missing}}] {{result.statusText}}"},
		map[string]any{"match": "^all", "tools": []any{
			map[string]any{"name": "sessions_list"},
			map[string]any{"name": "subagents", "params": map[string]any{"action": "list"}},
		}, "reply": "{{result}}"},
		map[string]any{"match": "^fail", "tool": map[string]any{"name": "sessions_list"}, "error": "list failed: {{result}}"},
	}}})
	tools := &fakeTools{results: map[string]string{
		"session_status": `{"ok": true, "stateVersion": 12, "stateChanges": {"events": [ {"kind": "human_direct_message"} ], "historyGap": false}, "statusText": "line 1\nline 2"}`,
		"subagents":      `{"status": "ok", "total": 3}`,
	}}
	res, err := rt.Run(context.Background(), Turn{Message: "status agent:main:x"}, tools)
	want := `v12 {"events":[{"kind":"human_direct_message"}],"historyGap":false} [] line 1` + "\nline 2"
	if err != nil || res.Reply != want {
		t.Fatalf("got %q, %v; want %q", res.Reply, err, want)
	}
	if res, err = rt.Run(context.Background(), Turn{Message: "all"}, tools); err != nil || res.Reply != `{"status":"ok","total":3}` {
		t.Fatalf("result of the last call: %+v, %v", res, err)
	}
	_, err = rt.Run(context.Background(), Turn{Message: "fail"}, &fakeTools{err: errors.New("limit must be a positive integer")})
	if re := asRunError(t, err); re.Message != "list failed: limit must be a positive integer" {
		t.Fatalf("thrown error in {{result}}: %q", re.Message)
	}
	// a message holding a placeholder is inserted as it is
	if res, err = rt.Run(context.Background(), Turn{Message: "status {{result}}"}, tools); err != nil || res.Reply != want {
		t.Fatalf("message with a placeholder: %+v, %v", res, err)
	}
	jsonEqual(t, tools.calls[len(tools.calls)-1].Params, `{"sessionKey":"{{result}}"}`)
}

func TestScriptToolsConfigErrors(t *testing.T) {
	spawn := map[string]any{"name": "sessions_spawn", "params": map[string]any{"task": "x"}}
	for _, tt := range []struct {
		rule map[string]any
		want string
	}{
		{map[string]any{"tool": spawn, "tools": []any{spawn}}, "agents.list[a].script.rules[0]: tool and tools are exclusive"},
		{map[string]any{"yield": "", "tools": []any{spawn}}, "agents.list[a].script.rules[0]: yield and tools are exclusive; end tools with {name: sessions_yield} instead"},
		{map[string]any{"tools": []any{}}, "agents.list[a].script.rules[0].tools: empty"},
		{map[string]any{"tools": []any{spawn, map[string]any{"name": "spawn"}}}, `agents.list[a].script.rules[0].tools[1].name: "spawn" is not a session tool`},
		{map[string]any{"tools": []any{map[string]any{"params": map[string]any{}}}}, "agents.list[a].script.rules[0].tools[0].name: required"},
		{map[string]any{"match": "(x)", "tools": []any{map[string]any{"name": "sessions_list", "params": map[string]any{"label": "{{2}}"}}}}, "agents.list[a].script.rules[0].tools[0].params.label: uses {{2}} but match has 1 capture group"},
		{map[string]any{"tools": "sessions_list"}, "agents.list[a].script.rules[0].tools: "},
		{map[string]any{"reply": "{{result}}"}, "agents.list[a].script.rules[0].reply: uses {{result}} but the rule calls no tool"},
		{map[string]any{"error": "{{result.text}}"}, "agents.list[a].script.rules[0].error: uses {{result.text}} but the rule calls no tool"},
		{map[string]any{"tool": spawn, "reply": "{{results}}"}, "agents.list[a].script.rules[0].reply: unknown placeholder {{results}}"},
		{map[string]any{"tool": map[string]any{"name": "sessions_list", "params": map[string]any{"label": "{{result}}"}}}, "agents.list[a].script.rules[0].tool.params.label: uses {{result}}, which tool params cannot: {{result}} is the result of the rule's last tool call, for reply and error only"},
	} {
		_, err := New(config.Agent{ID: "a", Script: map[string]any{"rules": []any{tt.rule}}})
		wantErrContains(t, err, tt.want)
	}
	// a yield rule's own call makes {{result}} available to its reply
	// (the reply of a refused yield)
	if _, err := New(config.Agent{ID: "a", Script: map[string]any{"rules": []any{map[string]any{"yield": "", "reply": "{{result.error}}"}}}}); err != nil {
		t.Fatal(err)
	}
}
