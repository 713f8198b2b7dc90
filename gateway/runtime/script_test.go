package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/config"
)

// The agents block of DESIGN.md, verbatim: its rule fields are a public
// contract that acceptance tests rely on.
const designAgents = `
agents:
  defaults:
    subagents: {maxSpawnDepth: 1, maxChildrenPerAgent: 5, archiveAfterMinutes: 60}
  list:
    - id: main
      runtime: script            # deterministic, for tests, demos and benchmarks
      script:
        rules:                   # first match wins; no match: reply with the message itself
          - match: "^ping"       # RE2 regexp on the inbound message body
            reply: "pong: {{message}}"
          - match: "^slow"
            delayMs: 200
            reply: "done"
          - match: "^fail"
            error: "scripted failure"
          - match: "^skip"
            reply: "REPLY_SKIP"
          - match: "^delegate (.*)"
            tool: {name: sessions_spawn, params: {task: "{{1}}"}}
            reply: "spawned"
    - id: ops
      runtime: exec              # one process per turn: JSON on stdin, reply JSON on stdout
      exec: {command: ["./my-agent"], timeoutSeconds: 60}
    - id: research
      runtime: openai            # any OpenAI-compatible chat-completions endpoint
      openai: {baseURL: "http://127.0.0.1:8080/v1", model: "gpt-x", apiKeyEnv: "OPENAI_API_KEY"}
`

func TestScriptDesignRules(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	agents := loadAgents(t, designAgents)
	rt := mustNew(t, agents["main"])
	ctx := context.Background()

	cases := []struct {
		msg, reply string
	}{
		{"ping there", "pong: ping there"},
		{"skip it", "REPLY_SKIP"},
		{"nothing matches", "nothing matches"},
		{"", ""},
		{"ANNOUNCE_SKIP", "ANNOUNCE_SKIP"},
	}
	for _, c := range cases {
		tools := &fakeTools{}
		res, err := rt.Run(ctx, Turn{Message: c.msg, Prompt: "[annotated] " + c.msg}, tools)
		if err != nil {
			t.Fatalf("%q: %v", c.msg, err)
		}
		if res.Reply != c.reply || len(res.ToolCalls) != 0 || len(tools.calls) != 0 {
			t.Fatalf("%q: got %+v, want reply %q and no tools", c.msg, res, c.reply)
		}
	}

	start := time.Now()
	res, err := rt.Run(ctx, Turn{Message: "slow one"}, nil)
	if err != nil || res.Reply != "done" {
		t.Fatalf("slow: %+v, %v", res, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("slow rule returned after %s, before its 200 ms delay", d)
	}

	_, err = rt.Run(ctx, Turn{Message: "fail now"}, nil)
	if re := asRunError(t, err); re.Message != "scripted failure" || err.Error() != "scripted failure" || errors.Is(err, ErrTimeout) {
		t.Fatalf("fail: %#v", re)
	}

	tools := &fakeTools{results: map[string]string{"sessions_spawn": `{"status":"accepted","runId":"r1","childSessionKey":"agent:main:subagent:x"}`}}
	res, err = rt.Run(ctx, Turn{Message: "delegate write the report"}, tools)
	if err != nil || res.Reply != "spawned" {
		t.Fatalf("delegate: %+v, %v", res, err)
	}
	if len(tools.calls) != 1 || tools.calls[0].Name != "sessions_spawn" {
		t.Fatalf("delegate tool calls: %+v", tools.calls)
	}
	jsonEqual(t, tools.calls[0].Params, `{"task":"write the report"}`)
	if len(res.ToolCalls) != 1 {
		t.Fatalf("recorded calls: %+v", res.ToolCalls)
	}
	got := res.ToolCalls[0]
	jsonEqual(t, got.Params, `{"task":"write the report"}`)
	jsonEqual(t, got.Result, `{"status":"accepted","runId":"r1","childSessionKey":"agent:main:subagent:x"}`)
	if got.Err != "" {
		t.Fatalf("unexpected tool error %q", got.Err)
	}
}

func TestScriptMatchSeesMessageNotPrompt(t *testing.T) {
	rt := mustNew(t, config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"match": "^ping$", "reply": "pong"},
	}}})
	res, err := rt.Run(context.Background(), Turn{
		Message: "ping",
		Prompt:  "[Inter-session message from agent:b:main isUser=false]\nping",
	}, nil)
	if err != nil || res.Reply != "pong" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestScriptFirstMatchWinsAndCatchAll(t *testing.T) {
	rt := mustNew(t, config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"match": "a", "reply": "first"},
		map[string]any{"match": "ab", "reply": "second"},
		map[string]any{"reply": "catch-all {{0}}"},
	}}})
	for msg, want := range map[string]string{"ab": "first", "xyz": "catch-all xyz"} {
		res, err := rt.Run(context.Background(), Turn{Message: msg}, nil)
		if err != nil || res.Reply != want {
			t.Fatalf("%q: got %+v, %v; want %q", msg, res, err, want)
		}
	}
}

func TestScriptTemplates(t *testing.T) {
	rt := mustNew(t, config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"match": `^echo`},
		map[string]any{"match": `^empty`, "reply": ""},
		map[string]any{"match": `^(\w+) (\w+)(?: (\w+))?`, "reply": "[{{0}}|{{1}}|{{ 2 }}|{{3}}|{{message}}]"},
	}}})
	cases := map[string]string{
		"hello world":      "[hello world|hello|world||hello world]",
		"a b c tail":       "[a b c|a|b|c|a b c tail]",
		"echo {{1}} as-is": "echo {{1}} as-is", // no reply: the message itself
		"empty please":     "",
		"hi there {{1}}":   "[hi there|hi|there||hi there {{1}}]", // inserted text is never expanded
	}
	for msg, want := range cases {
		res, err := rt.Run(context.Background(), Turn{Message: msg}, nil)
		if err != nil || res.Reply != want {
			t.Fatalf("%q: got %+v, %v; want %q", msg, res, err, want)
		}
	}
}

func TestScriptNoRules(t *testing.T) {
	for _, a := range []config.Agent{{ID: "a"}, {ID: "b", Runtime: "script", Script: map[string]any{}}} {
		res, err := mustNew(t, a).Run(context.Background(), Turn{Message: "hi"}, nil)
		if err != nil || res.Reply != "hi" {
			t.Fatalf("%s: %+v, %v", a.ID, res, err)
		}
	}
}

// Viper folds keys to lower case; the handlers read camelCase, so a rule's
// params must come out as sessionKey, not sessionkey.
func TestScriptToolParamsThroughConfig(t *testing.T) {
	agents := loadAgents(t, `
agents:
  list:
    - id: main
      script:
        rules:
          - match: "^tell (\\S+) (.*)"
            DelayMS: 1
            tool:
              name: sessions_send
              params: {sessionKey: "{{1}}", message: "{{2}} (from {{message}})", timeoutSeconds: 0, custom_Key: [ "{{1}}", 2, true ]}
            reply: "sent to {{1}}"
`)
	tools := &fakeTools{}
	res, err := mustNew(t, agents["main"]).Run(context.Background(), Turn{Message: "tell agent:b:main hello {{1}}"}, tools)
	if err != nil || res.Reply != "sent to agent:b:main" {
		t.Fatalf("got %+v, %v", res, err)
	}
	jsonEqual(t, tools.calls[0].Params, `{"sessionKey":"agent:b:main","message":"hello {{1}} (from tell agent:b:main hello {{1}})","timeoutSeconds":0,"custom_key":["agent:b:main",2,true]}`)
}

func TestScriptToolErrorIsRecordedAndTurnContinues(t *testing.T) {
	rt := mustNew(t, config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"tool": map[string]any{"name": "sessions_list"}, "reply": "listed"},
	}}})
	tools := &fakeTools{err: errors.New("sessionKey required")}
	res, err := rt.Run(context.Background(), Turn{Message: "x"}, tools)
	if err != nil || res.Reply != "listed" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].Err != "sessionKey required" || string(res.ToolCalls[0].Params) != "{}" {
		t.Fatalf("recorded %+v", res.ToolCalls)
	}
}

func TestScriptToolThenError(t *testing.T) {
	rt := mustNew(t, config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"match": "(.*)", "tool": map[string]any{"name": "sessions_yield"}, "error": "gave up on {{1}}"},
	}}})
	res, err := rt.Run(context.Background(), Turn{Message: "it"}, &fakeTools{})
	if re := asRunError(t, err); re.Message != "gave up on it" {
		t.Fatalf("got %q", re.Message)
	}
	if res == nil || len(res.ToolCalls) != 1 {
		t.Fatalf("a failed turn should still report its tool calls: %+v", res)
	}
}

func TestScriptDelayHonoursCancellation(t *testing.T) {
	rt := mustNew(t, config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"delayMs": 600000, "reply": "never"},
	}}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	res, err := rt.Run(ctx, Turn{Message: "x"}, nil)
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("got %+v, %v; want context.Canceled", res, err)
	}
	var re *RunError
	if errors.As(err, &re) {
		t.Fatal("a cancelled turn is not a RunError")
	}
}

func TestScriptDeterministic(t *testing.T) {
	a := config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"match": "^(a)(b)?", "tool": map[string]any{"name": "sessions_history", "params": map[string]any{
			"sessionKey": "{{1}}", "z": map[string]any{"y": "{{2}}", "x": []any{"{{message}}"}},
		}}, "reply": "{{2}}{{1}}"},
	}}}
	var first string
	for range 20 {
		tools := &fakeTools{}
		res, err := mustNew(t, a).Run(context.Background(), Turn{Message: "ab!"}, tools)
		if err != nil {
			t.Fatal(err)
		}
		got := res.Reply + string(tools.calls[0].Params)
		if first == "" {
			first = got
		} else if got != first {
			t.Fatalf("run differs: %s vs %s", got, first)
		}
	}
	if first != `ba{"sessionKey":"a","z":{"x":["ab!"],"y":"b"}}` {
		t.Fatalf("got %s", first)
	}
}

func TestScriptConfigErrors(t *testing.T) {
	rules := func(r ...any) map[string]any { return map[string]any{"rules": r} }
	ok := map[string]any{"match": "^ok", "reply": "ok"}
	cases := []struct {
		name  string
		agent config.Agent
		want  string
	}{
		{"bad regexp", config.Agent{ID: "main", Script: rules(ok, ok, map[string]any{"match": "(unclosed"})},
			"agents.list[main].script.rules[2].match: invalid regexp: missing closing ): `(unclosed`"},
		{"group out of range", config.Agent{ID: "main", Script: rules(map[string]any{"match": "^(a)", "reply": "{{2}}"})},
			"agents.list[main].script.rules[0].reply: uses {{2}} but match has 1 capture group"},
		{"group without match", config.Agent{ID: "main", Script: rules(map[string]any{"reply": "{{1}}"})},
			"rules[0].reply: uses {{1}} but match has no capture groups"},
		{"unknown placeholder", config.Agent{ID: "main", Script: rules(map[string]any{"reply": "{{mesage}}"})},
			"agents.list[main].script.rules[0].reply: unknown placeholder {{mesage}}; use {{message}} or {{N}}"},
		{"placeholder in params", config.Agent{ID: "main", Script: rules(map[string]any{"match": "x", "tool": map[string]any{"name": "sessions_send", "params": map[string]any{"message": []any{"{{1}}"}}}})},
			"agents.list[main].script.rules[0].tool.params.message[0]: uses {{1}} but match has no capture groups"},
		{"negative delay", config.Agent{ID: "main", Script: rules(map[string]any{"delayMs": -5})},
			"agents.list[main].script.rules[0].delayMs: must be 0 or more, got -5"},
		{"fractional delay", config.Agent{ID: "main", Script: rules(map[string]any{"delayMs": 1.5})},
			"agents.list[main].script.rules[0].delayMs: must be a whole number, got 1.5"},
		{"string delay", config.Agent{ID: "main", Script: rules(map[string]any{"delayMs": "200ms"})},
			`agents.list[main].script.rules[0].delayMs: must be a whole number, got the string "200ms"`},
		{"error and reply", config.Agent{ID: "main", Script: rules(map[string]any{"error": "x", "reply": "y"})},
			"agents.list[main].script.rules[0]: error and reply are exclusive"},
		{"unknown tool", config.Agent{ID: "main", Script: rules(map[string]any{"tool": map[string]any{"name": "session_spawn"}})},
			`agents.list[main].script.rules[0].tool.name: "session_spawn" is not a session tool; use one of sessions_list, sessions_history, sessions_search, sessions_send, sessions_spawn, sessions_yield, subagents, session_status`},
		{"tool without name", config.Agent{ID: "main", Script: rules(map[string]any{"tool": map[string]any{"params": map[string]any{}}})},
			"agents.list[main].script.rules[0].tool.name: required"},
		{"tool params not a mapping", config.Agent{ID: "main", Script: rules(map[string]any{"tool": map[string]any{"name": "sessions_list", "params": "limit=1"}})},
			"agents.list[main].script.rules[0].tool.params: "},
		{"unknown rule key", config.Agent{ID: "main", Script: rules(map[string]any{"match": "x", "delay": 5})},
			"agents.list[main].script.rules[0]: unknown key(s) delay (known: match, reply, delayMs, error, tool, tools, yield, usage)"},
		{"unknown section key", config.Agent{ID: "main", Script: map[string]any{"rule": []any{}}},
			"agents.list[main].script: unknown key(s) rule (known: rules, summary)"},
		{"rules not a list", config.Agent{ID: "main", Script: map[string]any{"rules": map[string]any{"match": "x"}}},
			"agents.list[main].script.rules: must be a list, got a mapping"},
		{"tool not a mapping", config.Agent{ID: "main", Script: rules(map[string]any{"tool": "sessions_list"})},
			`agents.list[main].script.rules[0].tool: must be a mapping, got the string "sessions_list"`},
		{"rule not a mapping", config.Agent{ID: "main", Script: rules("^ping")},
			`agents.list[main].script.rules[0]: must be a mapping, got the string "^ping"`},
		{"match not a string", config.Agent{ID: "main", Script: rules(map[string]any{"match": []any{"x"}})},
			"agents.list[main].script.rules[0].match: must be a string, got a list"},
		{"exec section without runtime", config.Agent{ID: "ops", Exec: map[string]any{"command": []any{"x"}}},
			"agents.list[ops].exec is set but agents.list[ops].runtime is empty (meaning script); set runtime: exec"},
		{"unknown runtime", config.Agent{ID: "x", Runtime: "python"},
			`agents.list[x].runtime: "python" is not a runtime; use script, exec or openai`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt, err := New(c.agent)
			if rt != nil {
				t.Fatalf("got a runtime (%T) with an error", rt)
			}
			wantErrContains(t, err, c.want)
			t.Log(err)
			if strings.Contains(err.Error(), "'") && strings.Contains(err.Error(), "expected type") {
				t.Fatalf("raw mapstructure wording leaked: %v", err)
			}
		})
	}
}

// Errors from YAML name keys as the user wrote them, modulo viper's case folding.
func TestScriptConfigErrorThroughLoader(t *testing.T) {
	agents := loadAgents(t, `
agents:
  list:
    - id: main
      script:
        rules:
          - match: "^a"
          - match: "^b"
          - match: "[z-a]"
`)
	_, err := New(agents["main"])
	wantErrContains(t, err, "agents.list[main].script.rules[2].match: invalid regexp: invalid character class range: `z-a`")
}
