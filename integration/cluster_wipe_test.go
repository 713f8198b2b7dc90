package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// sendRange calls sessions_send for messages from..to-1 (message
// "m-<prefix>-<i>", idempotencyKey "<prefix>-<i>"), to targets round
// robin, eight at a time, each waiting for its reply; it fails the test
// on a call that does not answer.
func (d *clusterDeployment) sendRange(t *testing.T, nc *nats.Conn, tok, prefix string, targets []string, from, to int) map[int]sendResult {
	t.Helper()
	out := map[int]sendResult{}
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				params, _ := json.Marshal(map[string]any{
					"sessionKey": targets[i%len(targets)], "message": fmt.Sprintf("m-%s-%04d", prefix, i),
					"timeoutSeconds": 60, "idempotencyKey": fmt.Sprintf("%s-%04d", prefix, i),
				})
				var r sendResult
				if _, err := faultCall(t, nc, d.names, tok, "sessions_send", params, &r); err != nil {
					t.Errorf("send %s %d: %v", prefix, i, err)
				}
				mu.Lock()
				out[i] = r
				mu.Unlock()
			}
		})
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// checkSends checks each send answered ok with its own reply and run,
// its run record is ok, and its prompt and reply are in its target's
// transcript exactly once.
func checkSends(t *testing.T, deps *handlers.Deps, prefix string, targets []string, results map[int]sendResult) {
	t.Helper()
	perTarget := map[string][]string{}
	seen := map[string]int{}
	for i, r := range results {
		if r.Status != "ok" || r.Reply != fmt.Sprintf("ok m-%s-%04d", prefix, i) || r.RunID == "" {
			t.Errorf("send %s %d: %+v", prefix, i, r)
			continue
		}
		if j, dup := seen[r.RunID]; dup {
			t.Errorf("sends %d and %d share run %s", j, i, r.RunID)
		}
		seen[r.RunID] = i
		target := targets[i%len(targets)]
		perTarget[target] = append(perTarget[target], r.RunID)
		var rec *runs.Record
		retryFor(t, 60*time.Second, "read run "+r.RunID, func(ctx context.Context) error {
			var err error
			rec, _, err = deps.Runs.Get(ctx, r.RunID)
			return err
		})
		if rec.Status != runs.OK || rec.SessionKey != target {
			t.Errorf("send %s %d: run record %+v", prefix, i, rec)
		}
	}
	for _, target := range targets {
		checkRunParts(t, deps.Transcripts, target, perTarget[target])
	}
}

// TestClusterNodeWipe: a node is stopped and its data dir removed while
// sends go on; started again empty, it rejoins and catches up: every
// stream holds the same messages on all three nodes. Then another node
// stops, so the wiped one is in every quorum, and every send before,
// during and after is still there exactly once.
func TestClusterNodeWipe(t *testing.T) {
	start0 := time.Now()
	per := faultCount(200, 30) // sends in each of the three phases
	d := newClusterDeployment(t, clusterFaultConfig)
	w := d.startWorker(t, d.connect(t, "worker", 0))
	d.startGateway(t, d.connect(t, "gw-a", 0), "gw-a", 5*time.Second)
	targets := createChildren(t, w, clusterCaller, "wp", 4)
	tok, err := d.op.Mint(bus.Caller{SessionKey: clusterCaller}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client := d.connect(t, "client", 0)
	results := d.sendRange(t, client, tok, "wp", targets, 0, per)

	const victim = 1
	d.c.Stop(victim)
	if err := d.c.Wipe(victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped %s and removed its store after %d sends", d.c.Name(victim), per)
	maps.Copy(results, d.sendRange(t, client, tok, "wp", targets, per, 2*per))
	if err := d.c.Start(victim); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	maps.Copy(results, d.sendRange(t, client, tok, "wp", targets, 2*per, 3*per))

	// caught up: the wiped node holds every stream, with the same
	// messages as the others
	var last string
	defer func() {
		if t.Failed() && last != "" {
			t.Log("stream states at the last look:", last)
		}
	}()
	bustest.WaitFor(t, 120*time.Second, d.c.Name(victim)+" holding what the others hold", func() bool {
		var want map[string]embedded.StreamState
		for i := range d.c.Len() {
			got, err := d.c.StreamStates(i)
			if err != nil {
				last = err.Error()
				return false
			}
			if want == nil {
				want = got
				continue
			}
			if !maps.Equal(want, got) {
				last = fmt.Sprintf("%s: %v\n%s: %v", d.c.Name(0), want, d.c.Name(i), got)
				return false
			}
		}
		return len(want) > 0
	})
	t.Logf("%s caught up %v after it started again", d.c.Name(victim), time.Since(restarted).Round(time.Millisecond))

	// the wiped node and one other now serve everything
	d.c.Stop(2)
	checkSends(t, w.Deps, "wp", targets, results)
	if len(results) != 3*per {
		t.Fatalf("%d sends answered, want %d", len(results), 3*per)
	}
	t.Logf("%d sends checked with %s stopped, %v in all", len(results), d.c.Name(2), time.Since(start0).Round(time.Millisecond))
}
