package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/config/configtest"
)

// Every agent of DESIGN.md's sample builds, except ops, whose ./my-agent does
// not exist here: that must be a clear startup error, not a failed turn later.
func TestNewDesignSample(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	agents := loadAgents(t, designAgents)
	if _, ok := mustNew(t, agents["main"]).(*scriptRuntime); !ok {
		t.Fatal("main is not a script runtime")
	}
	rt := mustNew(t, agents["research"])
	if _, ok := rt.(io.Closer); !ok {
		t.Fatal("the openai runtime should offer Close for its idle connections")
	}
	_, err := New(agents["ops"])
	wantErrContains(t, err, `agents.list[ops].exec.command[0]: "./my-agent": no such file or directory`)
}

func TestNewRuntimeNames(t *testing.T) {
	for _, name := range []string{"", "script", "Script", " script "} {
		if _, ok := mustNew(t, config.Agent{ID: "a", Runtime: name}).(*scriptRuntime); !ok {
			t.Fatalf("runtime %q is not script", name)
		}
	}
	// With an explicit runtime, sections for others are left alone, so
	// switching runtimes is a one-line change.
	a := config.Agent{ID: "a", Runtime: "script", Exec: map[string]any{"command": "not even valid"}}
	mustNew(t, a)
}

// JSON config files hand numbers over as float64; they must still decode.
func TestNewFromJSONConfig(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, dir, "agent", "cat >/dev/null; printf '{\"reply\":\"%s\"}' \"$N\"\n")
	c, _ := configtest.Load(t, dir, "sessionbus.json", fmt.Sprintf(`{"agents":{"list":[
		{"id":"s","script":{"rules":[{"match":"^x","delayMs":1,"reply":"y"}]}},
		{"id":"e","runtime":"exec","exec":{"command":[%q],"timeoutSeconds":5,"env":{"N":7}}}
	]}}`, filepath.Join(dir, "agent")))
	res, err := mustNew(t, c.Agents.List[0]).Run(context.Background(), Turn{Message: "x"}, nil)
	if err != nil || res.Reply != "y" {
		t.Fatalf("script: %+v, %v", res, err)
	}
	res, err = mustNew(t, c.Agents.List[1]).Run(context.Background(), Turn{}, nil)
	if err != nil || res.Reply != "7" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
}

// One Runtime serves every session of its agent at once.
func TestScriptConcurrentTurns(t *testing.T) {
	rt := mustNew(t, config.Agent{ID: "a", Script: map[string]any{"rules": []any{
		map[string]any{"match": `^n(\d+)$`, "tool": map[string]any{"name": "sessions_send", "params": map[string]any{"message": "{{1}}"}}, "reply": "r{{1}}"},
	}}})
	tools := &fakeTools{}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			res, err := rt.Run(context.Background(), Turn{Message: fmt.Sprintf("n%d", i)}, tools)
			if err != nil {
				errs <- err
				return
			}
			if want := fmt.Sprintf("r%d", i); res.Reply != want || string(res.ToolCalls[0].Params) != fmt.Sprintf(`{"message":"%d"}`, i) {
				errs <- fmt.Errorf("turn %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(tools.calls) != 64 {
		t.Fatalf("%d tool calls", len(tools.calls))
	}
}

func TestRunErrorTimeoutMatching(t *testing.T) {
	if errors.Is(&RunError{Message: "x"}, ErrTimeout) {
		t.Fatal("a plain RunError matched ErrTimeout")
	}
	err := fmt.Errorf("run r1: %w", &RunError{Message: "slow", Timeout: true})
	if !errors.Is(err, ErrTimeout) {
		t.Fatal("a wrapped timeout RunError did not match ErrTimeout")
	}
}

// The tool table is what models see; it must be well-formed JSON schema.
func TestToolTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range ToolSpecs() {
		if seen[s.Name] || s.Description == "" {
			t.Fatalf("%s: duplicate or undescribed", s.Name)
		}
		seen[s.Name] = true
		props := s.Parameters["properties"].(props)
		if req, ok := s.Parameters["required"].([]string); ok {
			for _, r := range req {
				if _, ok := props[r]; !ok {
					t.Fatalf("%s requires %s, which it does not describe", s.Name, r)
				}
			}
		}
		for name, p := range props {
			if p.(map[string]any)["type"] == nil {
				t.Fatalf("%s.%s has no type", s.Name, name)
			}
			if paramCase[lower(name)] != name {
				t.Fatalf("%s.%s: case not restorable", s.Name, name)
			}
		}
		if !json.Valid(mustJSON(s.Parameters)) {
			t.Fatalf("%s: schema does not marshal", s.Name)
		}
	}
	if len(seen) != 9 {
		t.Fatalf("%d tools", len(seen))
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
