package demo

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway/runtime"
)

// The gateway's openai runtime, pointed at the demo model as serve --demo
// points its writer agent, streams the model's words and runs its
// sessions_list call before the answer.
func TestDemoModelThroughTheRuntime(t *testing.T) {
	m, err := StartModel(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := config.Default()
	Configure(c)
	AddStreamingAgent(c, m)
	rt, err := runtime.New(c.Agents.List[1])
	if err != nil {
		t.Fatal(err)
	}
	var called []string
	tools := runtime.ToolsFunc(func(_ context.Context, tool string, _ json.RawMessage) (json.RawMessage, error) {
		called = append(called, tool)
		return json.RawMessage(`{"sessions":[]}`), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := rt.Run(ctx, runtime.Turn{SessionKey: "agent:writer:subagent:x", AgentID: StreamingAgent, RunID: "r1", Message: "draft", Prompt: "draft",
		AllowedTools: []string{"sessions_list", "sessions_yield"}}, tools)
	if err != nil {
		t.Fatal(err)
	}
	if len(called) != 1 || called[0] != "sessions_list" || res.Reply != answer {
		t.Fatalf("tools called %v, reply %q", called, res.Reply)
	}
}
