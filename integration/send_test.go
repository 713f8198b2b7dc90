package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// sendStack is a worker and one in-process gateway on one server.
func sendStack(t *testing.T, edit func(*config.Config)) (*handlerstest.Stack, *gateway.Gateway) {
	t.Helper()
	s := handlerstest.Start(t, edit)
	return s, gatewaytest.Start(t, s, s.Conn, "gw-test", nil, gateway.Options{})
}

func scriptAgent(id string, rules ...map[string]any) config.Agent {
	rs := make([]any, len(rules))
	for i, r := range rules {
		rs[i] = r
	}
	return config.Agent{ID: id, Runtime: "script", Script: map[string]any{"rules": rs}}
}

// TestSendThroughGateway: a waited send returns the target agent's reply,
// the A2A flow announces to the channel subject, and a repeated
// idempotency key returns the first run without a second turn.
func TestSendThroughGateway(t *testing.T) {
	s, gw := sendStack(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "agent"
		c.Session.AgentToAgent.MaxPingPongTurns = 1
		c.Agents.List = []config.Agent{scriptAgent("main",
			map[string]any{"match": "^ping (.*)", "reply": "pong {{1}}"},
			map[string]any{"match": "^pong", "reply": "REPLY_SKIP"},
			map[string]any{"match": "^Agent-to-agent announce step", "reply": "announcing"},
		)}
	})
	target := "agent:main:telegram:group:g1"
	sub, err := s.Conn.SubscribeSync("sb.deliver.>")
	if err != nil {
		t.Fatal(err)
	}
	res := s.MustCall(mainKey, "sessions_send", `{"sessionKey":"`+target+`","message":"ping 1","timeoutSeconds":30,"idempotencyKey":"k1"}`)
	if res["status"] != "ok" || res["reply"] != "pong 1" {
		t.Fatalf("send: %v", res)
	}
	msg, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no announce: %v", err)
	}
	var d map[string]any
	_ = json.Unmarshal(msg.Data, &d)
	if msg.Subject != "sb.deliver.telegram" || d["message"] != "announcing" || d["to"] != "group:g1" || d["runId"] != res["runId"] {
		t.Fatalf("announce %s: %v", msg.Subject, d)
	}
	again := s.MustCall(mainKey, "sessions_send", `{"sessionKey":"`+target+`","message":"ping 1","timeoutSeconds":30,"idempotencyKey":"k1"}`)
	if again["runId"] != res["runId"] || again["status"] != "ok" || again["reply"] != "pong 1" {
		t.Fatalf("idempotent repeat: %v vs %v", again, res)
	}
	rec, _, err := gw.Runs().Get(t.Context(), res["runId"].(string))
	if err != nil || rec.Attempts != 1 {
		t.Fatalf("run record: %+v %v", rec, err)
	}
	hist := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"`+target+`"}`)
	if n := strings.Count(mustJSON(hist["messages"]), "ping 1"); n != 1 {
		t.Fatalf("the prompt is in the target transcript %d times, want 1: %v", n, hist["messages"])
	}
}

// TestSendLoopBound: two agents that forward every message to each other
// stop at bus.maxRunHops instead of echoing forever.
func TestSendLoopBound(t *testing.T) {
	const maxHops = 6
	s, gw := sendStack(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Session.AgentToAgent.MaxPingPongTurns = 0
		c.Bus.MaxRunHops = maxHops
		relay := func(to string) map[string]any {
			return map[string]any{"match": "^relay", "reply": "relayed",
				"tool": map[string]any{"name": "sessions_send", "params": map[string]any{"sessionKey": to, "message": "relay {{message}}", "timeoutSeconds": 0}}}
		}
		c.Agents.List = []config.Agent{scriptAgent("ping", relay("agent:pong:main")), scriptAgent("pong", relay("agent:ping:main"))}
	})
	res := s.MustCall("agent:ping:main", "sessions_send", `{"sessionKey":"agent:pong:main","message":"relay go","timeoutSeconds":0}`)
	if res["status"] != "accepted" {
		t.Fatalf("first send: %v", res)
	}
	chain := ""
	bustest.WaitFor(t, 60*time.Second, "the runs of the relay chain", func() bool {
		recs := primaryRuns(t, gw.Runs())
		for _, r := range recs {
			if r.RunID == res["runId"] {
				chain = r.ChainID
			}
			if r.Hop == maxHops && r.Terminal() {
				return true
			}
		}
		return false
	})
	recs := primaryRuns(t, gw.Runs())
	hops := map[int]int{}
	for _, r := range recs {
		if r.ChainID != chain {
			t.Fatalf("run %s left the chain: %+v", r.RunID, r)
		}
		hops[r.Hop]++
	}
	if len(recs) != maxHops+1 || hops[maxHops+1] != 0 {
		t.Fatalf("runs by hop = %v (%d runs), want one per hop 0..%d", hops, len(recs), maxHops)
	}
}

func primaryRuns(t *testing.T, recs *runs.Records) []*runs.Record {
	t.Helper()
	ctx := t.Context()
	lister, err := recs.KV().ListKeys(ctx)
	if err != nil {
		if err == jetstream.ErrNoKeysFound {
			return nil
		}
		t.Fatal(err)
	}
	var out []*runs.Record
	for k := range lister.Keys() {
		if strings.Contains(k, ".") { // A2A step runs
			continue
		}
		r, _, err := recs.Get(ctx, k)
		if err == nil {
			out = append(out, r)
		}
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

const mainKey = "agent:main:main"
