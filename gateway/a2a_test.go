package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/rules"
)

// a2aStack is a worker and a gateway on one server. Agent "req" is listed
// first, so a gateway that fell back to the first listed agent for a key
// without an agent prefix would run "main"'s turns as "req".
func a2aStack(t *testing.T) (*handlerstest.Stack, *Gateway) {
	t.Helper()
	script := func(id string) config.Agent {
		return config.Agent{ID: id, Runtime: "script", Script: map[string]any{"rules": []any{
			map[string]any{"match": "^Agent-to-agent announce step", "reply": "ANNOUNCE_SKIP"},
			map[string]any{"reply": id + " says: {{message}}"},
		}}}
	}
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Session.AgentToAgent.MaxPingPongTurns = 1
		c.Agents.List = []config.Agent{script("req"), script("main")}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := StartWithOptions(ctx, s.Conn, s.Config, s.Operator, "gw-a2a", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	return s, g
}

func waitRun(t *testing.T, g *Gateway, runID string) *runs.Record {
	t.Helper()
	return runstest.WaitRun(t, g.Runs(), runID, 20*time.Second)
}

// One table of requester keys, read through both paths: the handlers
// (which agent owns the key, and which session "current" is for that
// caller) and the gateway (where, and as which agent, the ping-pong reply
// step runs). Both must name the same session and the same agent.
func TestRequesterKeyAgentAndSessionAgreeInHandlersAndGateway(t *testing.T) {
	s, g := a2aStack(t)
	const target = "agent:main:discord:group:1"
	tests := []struct {
		requester   string // the caller's token sessionKey
		wantSession string // its canonical store key
		wantAgent   string
	}{
		{"main", "agent:main:main", "main"},                      // the alias names the default agent's main session
		{"agent:Req:main", "agent:Req:main", "req"},              // agent ids compare case-insensitively
		{"agent:req:work", "agent:req:work", "req"},              // already canonical
		{"discord:group:legacy", "discord:group:legacy", "main"}, // legacy bare key: the default agent
	}
	for _, tt := range tests {
		if got := rules.AgentIDFromKey(tt.requester); got != tt.wantAgent {
			t.Errorf("handlers: AgentIDFromKey(%q) = %q, want %q", tt.requester, got, tt.wantAgent)
		}
		res := s.MustCall(tt.requester, "sessions_send", `{"sessionKey":"`+target+`","message":"hello","timeoutSeconds":30}`)
		if res["status"] != "ok" || res["reply"] != "main says: hello" {
			t.Fatalf("requester %s: send %v", tt.requester, res)
		}
		runID := res["runId"].(string)
		pp := waitRun(t, g, StepRunID(runID, "pingpong:1"))
		if pp.SessionKey != tt.wantSession || pp.AgentID != tt.wantAgent {
			t.Errorf("gateway: requester %s: ping-pong step ran in %q as agent %q, want %q as %q",
				tt.requester, pp.SessionKey, pp.AgentID, tt.wantSession, tt.wantAgent)
		}
		if want := tt.wantAgent + " says: main says: hello"; pp.Reply != want {
			t.Errorf("gateway: requester %s: ping-pong reply %q, want %q", tt.requester, pp.Reply, want)
		}
		waitRun(t, g, StepRunID(runID, "announce"))

		// The caller's own session, as the handlers resolve it, holds the
		// ping-pong turn.
		hist := s.MustCall(tt.requester, "sessions_history", `{"sessionKey":"current"}`)
		msgs, _ := hist["messages"].([]any)
		found := false
		for _, m := range msgs {
			if mm, _ := m.(map[string]any); mm != nil && mm["content"] == pp.Reply {
				found = true
			}
		}
		if !found {
			t.Errorf("handlers: requester %s: its own session (%v) does not hold the ping-pong reply %q: %v",
				tt.requester, hist["sessionKey"], pp.Reply, msgs)
		}
	}
}

// A send into the caller's own main session, addressed by its canonical key
// while the caller is known by the alias, is no conversation between two
// sessions: there is no ping-pong, only the announce step.
func TestNoPingPongWhenRequesterAliasIsTheTarget(t *testing.T) {
	s, g := a2aStack(t)
	res := s.MustCall("main", "sessions_send", `{"sessionKey":"agent:main:main","message":"note to self","timeoutSeconds":30}`)
	if res["status"] != "ok" {
		t.Fatalf("send %v", res)
	}
	runID := res["runId"].(string)
	if ann := waitRun(t, g, StepRunID(runID, "announce")); ann.SessionKey != "agent:main:main" {
		t.Fatalf("announce %+v", ann)
	}
	if rec, _, err := g.Runs().Get(context.Background(), StepRunID(runID, "pingpong:1")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a ping-pong step was started with the caller itself: %+v %v", rec, err)
	}
}
