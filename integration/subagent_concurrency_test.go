package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/rules"
)

// TestSubagentMaxConcurrentAcrossGateways: with
// agents.defaults.subagents.maxConcurrent 2 and two gateways sharing the
// run queue, eight children spawned at once never run more than two at a
// time (as their run records show them, in the order the bucket took the
// writes), every one of them finishes ok but one killed while it waits,
// and the bound is reached.
func TestSubagentMaxConcurrentAcrossGateways(t *testing.T) {
	const children, bound = 8, 2
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.Defaults.Subagents.MaxConcurrent = bound
		c.Agents.Defaults.Subagents.MaxChildrenPerAgent = children
		c.Agents.Defaults.Subagents.AllowAgents = []string{"*"}
		c.Agents.List = []config.Agent{
			scriptAgent("main", map[string]any{"reply": "REPLY_SKIP"}),
			// slow enough that unbounded children would overlap
			scriptAgent("worker", map[string]any{"match": ".*", "delayMs": 400, "reply": "done"}),
		}
	})
	for _, id := range []string{"gw-1", "gw-2"} {
		gatewaytest.Start(t, s, s.Conn, id, nil, gateway.Options{})
	}

	wctx, wcancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer wcancel()
	watch, err := s.Worker.Deps.Runs.KV().WatchAll(wctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Stop() }()

	runIDs := make([]string, children)
	var wg sync.WaitGroup
	for i := range children {
		wg.Go(func() {
			res, err := s.Call(mainKey, "sessions_spawn", fmt.Sprintf(`{"task":"task %d","agentId":"worker"}`, i))
			if err != nil || res["status"] != "accepted" {
				t.Errorf("spawn %d: %v %v", i, res, err)
				return
			}
			runIDs[i], _ = res["runId"].(string)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// one child is killed, most likely while it waits for a slot: it ends
	// killed (or ok, had it run already) and frees its place
	victim := ""
	for i := range children {
		rec, _, err := s.Worker.Deps.Runs.Get(wctx, runIDs[i])
		if err == nil && rec.Status == runs.Pending {
			victim = rec.SessionKey
			break
		}
	}
	if victim != "" {
		if res := s.MustCall(mainKey, "subagents", `{"action":"kill","target":"`+victim+`"}`); res["status"] != "ok" {
			t.Fatalf("kill %s: %v", victim, res)
		}
	}
	want := map[string]bool{}
	for _, id := range runIDs {
		want[id] = true
	}

	running, ended := map[string]bool{}, map[string]bool{}
	most, gateways := 0, map[string]bool{}
	for len(ended) < children {
		select {
		case e := <-watch.Updates():
			rec, ok := runstest.RunUpdate(e)
			if !ok || !rules.IsSubagentKey(rec.SessionKey) || !want[rec.RunID] {
				continue
			}
			switch {
			case rec.Terminal():
				delete(running, rec.RunID)
				ended[rec.RunID] = true
				if rec.Status != runs.OK && (rec.Status != runs.Killed || rec.SessionKey != victim) {
					t.Errorf("child run %s ended %s: %s", rec.RunID, rec.Status, rec.Error)
				}
			case rec.Status == runs.Running:
				running[rec.RunID] = true
				gateways[rec.Gateway] = true
			}
			most = max(most, len(running))
			if len(running) > bound {
				t.Fatalf("%d child runs running at once (bound %d): %v", len(running), bound, running)
			}
		case <-wctx.Done():
			t.Fatalf("only %d of %d child runs ended", len(ended), children)
		}
	}
	if most != bound {
		t.Errorf("at most %d child runs ran at once; the bound %d was never reached", most, bound)
	}
	t.Logf("at most %d of %d children running at once, on gateways %v; killed %q while it waited", most, children, gateways, victim)
}
