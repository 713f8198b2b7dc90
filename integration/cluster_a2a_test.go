package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/a2a"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/streams/deliveries"
)

// clusterA2AConfig: agent req sends to agent main's telegram group
// sessions; two ping-pong turns and an announce step follow each reply.
// The requester's turns take a second, so the one a gateway is seen
// running is still running when its connection is closed.
const clusterA2AConfig = `
bus:
  replicas: 3
tools:
  agentToAgent:
    enabled: true
  sessions:
    visibility: all
session:
  agentToAgent:
    maxPingPongTurns: 2
agents:
  list:
    - id: req
      runtime: script
      script:
        rules:
          - match: ".*"
            delayMs: 1000
            reply: "tell me more"
    - id: main
      runtime: script
      script:
        rules:
          - match: "^Agent-to-agent announce step"
            delayMs: 200
            reply: "announcing"
          - match: ".*"
            delayMs: 200
            reply: "pong"
`

// TestClusterGatewayCutMidA2A: eight agent-to-agent flows (a reply, two
// ping-pong turns, an announce) run on two gateways; when one gateway is
// seen running a flow's step, its connection is closed. The other gateway
// takes over: every flow ends done and delivered, each announce is
// published to the channel exactly once, no step's transcript entry is
// doubled, and every run cut on the closed gateway finishes on the other,
// on a second attempt.
func TestClusterGatewayCutMidA2A(t *testing.T) {
	const flows = 8
	d := newClusterDeployment(t, clusterA2AConfig)
	w := d.startWorker(t, d.connect(t, "worker", 0))
	victimConn := d.connect(t, "gw-a", 1)
	d.startGateway(t, victimConn, "gw-a", 2*time.Second)
	survivor := d.startGateway(t, d.connect(t, "gw-b", 2), "gw-b", 2*time.Second)
	// one requester per flow: a session runs one turn at a time
	targets, requesters, toks := make([]string, flows), make([]string, flows), make([]string, flows)
	for i := range targets {
		targets[i] = fmt.Sprintf("agent:main:telegram:group:g%d", i)
		requesters[i] = fmt.Sprintf("agent:req:r%d", i)
		var err error
		if toks[i], err = d.op.Mint(bus.Caller{SessionKey: requesters[i]}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}

	// watch for a step running on gw-a before the flows start
	ctx := bustest.Context(t)
	watch, err := survivor.Runs().KV().WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	client := d.connect(t, "client", 0)
	primaries := make([]string, flows)
	var wg sync.WaitGroup
	for i := range flows {
		wg.Go(func() {
			params, _ := json.Marshal(map[string]any{"sessionKey": targets[i], "message": fmt.Sprintf("ping %d", i), "timeoutSeconds": 60, "idempotencyKey": fmt.Sprintf("a2a-%d", i)})
			var r sendResult
			if _, err := faultCall(t, client, d.names, toks[i], "sessions_send", params, &r); err != nil || r.Status != "ok" || r.Reply != "pong" {
				t.Errorf("send %d: %+v %v", i, r, err)
			}
			primaries[i] = r.RunID
		})
	}
	caught := runstest.CatchRunning(t, ctx, watch, "never saw gw-a run a flow's step", func(key string, rec *runs.Record) bool {
		return strings.Contains(key, ".") && rec.Gateway == "gw-a"
	}).RunID
	_ = watch.Stop()
	victimConn.Close()
	// the runs gw-a can no longer finish: running on it as it was cut
	js, err := jetstream.New(client)
	if err != nil {
		t.Fatal(err)
	}
	var cut []string
	retryFor(t, 60*time.Second, "runs running on gw-a", func(ctx context.Context) error {
		cut = cut[:0]
		keys, err := survivor.Runs().KV().Keys(ctx)
		for _, k := range keys {
			r, _, gerr := survivor.Runs().Get(ctx, k)
			if gerr != nil {
				return gerr
			}
			if r.Status == runs.Running && r.Gateway == "gw-a" {
				cut = append(cut, r.RunID)
			}
		}
		return err
	})
	if len(cut) == 0 {
		t.Fatalf("gw-a finished step %s before its connection closed: nothing was cut", caught)
	}
	t.Logf("closed gw-a's connection while it ran step %s; %d runs were running on it: %v", caught, len(cut), cut)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	flowsStore, err := a2a.Open(ctx, js, d.names, a2a.WithReplicas(clusterReplicas))
	if err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 90*time.Second, "every flow delivered", func() bool {
		for _, p := range primaries {
			st, err := flowsStore.Get(ctx, p)
			if err != nil || !st.Done || !st.Delivered {
				return false
			}
		}
		return true
	})
	bustest.WaitFor(t, 60*time.Second, "every run finished", func() bool {
		n, err := w.Deps.Queue.Unfinished(ctx)
		return err == nil && n == 0
	})
	for _, id := range cut {
		rec, _, err := survivor.Runs().Get(ctx, id)
		if err != nil || rec.Status != runs.OK || rec.Gateway != "gw-b" || rec.Attempts < 2 {
			t.Errorf("run %s cut on gw-a: %+v %v", id, rec, err)
		}
	}

	// every announce on the channel exactly once
	perRun := map[string]int{}
	for _, m := range readStream(t, js, d.names.DeliverStream()) {
		var del deliveries.Delivery
		if err := json.Unmarshal(m, &del); err != nil {
			t.Fatal(err)
		}
		if del.Channel != "telegram" || del.Message != "announcing" {
			t.Errorf("delivery %+v", del)
		}
		perRun[del.RunID]++
	}
	for i, p := range primaries {
		if perRun[p] != 1 {
			t.Errorf("flow %d (run %s) announced %d times", i, p, perRun[p])
		}
	}
	if len(perRun) != flows {
		t.Errorf("announces of %d runs, want %d: %v", len(perRun), flows, perRun)
	}
	for _, s := range append(requesters, targets...) {
		checkRunParts(t, w.Deps.Transcripts, s, nil)
	}
}

// readStream returns the data of every message in stream, in order.
func readStream(t *testing.T, js jetstream.JetStream, stream string) [][]byte {
	t.Helper()
	var out [][]byte
	retryFor(t, 60*time.Second, "read "+stream, func(ctx context.Context) error {
		out = out[:0]
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		n := s.CachedInfo().State.Msgs
		c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		for uint64(len(out)) < n {
			m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				return err
			}
			out = append(out, m.Data())
		}
		return nil
	})
	return out
}
