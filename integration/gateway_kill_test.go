package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// gatewayKillConfig gives agent main a script runtime with a small delay, so
// runs are in flight on both gateways when one of them dies, and quotas
// that let 500 sends from one session through.
const gatewayKillConfig = loadQuotas + `
agents:
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: ".*"
            delayMs: 30
            reply: "ok {{message}}"
`

const (
	gatewayKillSends    = 500
	gatewayKillSenders  = 16
	gatewayKillSessions = 8   // a handful: runs also queue behind the dead gateway's lane locks
	gatewayKillAfter    = 100 // completed sends before the kill
	gatewayKillVictim   = "gw-a"
	gatewayKillSurvivor = "gw-b"
	gatewayKillAckWait  = "5s"
)

// TestGatewayKill SIGKILLs one of two gateway processes while 500
// sessions_send calls flow: every send completes with its reply, no run is
// started twice or executed twice to completion, and no transcript entry is
// doubled.
//
// The gateways run with --ack-wait 5s: the runs caught on the dead gateway
// are redelivered to the survivor after that.
func TestGatewayKill(t *testing.T) {
	start0 := time.Now()
	dep := newDeployment(t, gatewayKillConfig)
	s, nc, cfgPath, op, creds := dep.s, dep.nc, dep.cfgPath, dep.op, dep.creds

	d := dep.startWorker(t).Deps

	// the caller spawned every target, so sessions_send skips the A2A flow
	const caller = "agent:main:main"
	targets := make([]string, gatewayKillSessions)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var lastRev uint64
	for i := range targets {
		targets[i] = fmt.Sprintf("agent:main:subagent:gk%03d", i)
		now := time.Now().UnixMilli()
		rev, err := d.Store.Create(ctx, &sessions.Entry{
			Key: targets[i], AgentID: "main", SessionID: sessions.NewID(),
			CreatedAt: now, UpdatedAt: now, SpawnedBy: caller,
		})
		if err != nil {
			t.Fatalf("create %s: %v", targets[i], err)
		}
		lastRev = max(lastRev, rev)
	}
	if err := d.Index.WaitApplied(ctx, lastRev); err != nil {
		t.Fatal(err)
	}
	cancel()

	gws := map[string]*proc{}
	for _, id := range []string{gatewayKillVictim, gatewayKillSurvivor} {
		p := start(t, "gateway", "--server", s.URL(), "--id", id, "--creds", creds, "--config", cfgPath, "--log-level", "warn", "--ack-wait", gatewayKillAckWait)
		p.waitLine(t, "ready "+id)
		gws[id] = p
	}

	tok, err := op.Mint(bus.Caller{SessionKey: caller}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		runID, target string
		retries       int
	}
	results := make([]outcome, gatewayKillSends)
	var completed, retried atomic.Int64
	send := func(i int) {
		target := targets[i%len(targets)]
		params, _ := json.Marshal(map[string]any{
			"sessionKey":     target,
			"message":        fmt.Sprintf("m-%03d", i),
			"timeoutSeconds": 60,
			"idempotencyKey": fmt.Sprintf("gk-%03d", i),
		})
		for attempt := 0; ; attempt++ {
			cctx, ccancel := context.WithTimeout(context.Background(), 90*time.Second)
			out, err := bus.Call(cctx, nc, d.Names, tok, "sessions_send", params)
			ccancel()
			if err != nil {
				transport := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || isUnavailable(err)
				if !transport || attempt >= 3 {
					t.Errorf("send %d failed for good after %d attempts: %v", i, attempt+1, err)
					return
				}
				retried.Add(1)
				continue // same idempotencyKey: never a second run
			}
			var res struct {
				RunID, Status, Reply, Error, SessionKey string
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Errorf("send %d: reply %s: %v", i, out, err)
				return
			}
			if res.Status != "ok" || res.Reply != fmt.Sprintf("ok m-%03d", i) || res.RunID == "" {
				t.Errorf("send %d: %s", i, out)
			}
			results[i] = outcome{runID: res.RunID, target: target, retries: attempt}
			completed.Add(1)
			return
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range gatewayKillSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				send(i)
			}
		}()
	}
	go func() {
		for i := range gatewayKillSends {
			work <- i
		}
		close(work)
	}()

	// After ~100 completed sends, kill the victim the moment it is seen
	// running a turn, so at least one run is caught mid-turn.
	bustest.WaitFor(t, 60*time.Second, "sends completed before the kill", func() bool { return completed.Load() >= gatewayKillAfter })
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	watch, err := d.Runs.KV().WatchAll(wctx, jetstream.UpdatesOnly())
	if err != nil {
		wcancel()
		t.Fatal(err)
	}
	caught := runstest.CatchRunning(t, wctx, watch, fmt.Sprintf("never saw %s running a turn", gatewayKillVictim), func(_ string, rec *runs.Record) bool {
		return rec.Gateway == gatewayKillVictim
	}).RunID
	victim := gws[gatewayKillVictim]
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	atKill := completed.Load()
	killedAt := time.Now()
	_ = watch.Stop()
	wcancel()
	<-victim.done
	victim.done <- nil // for start's cleanup
	t.Logf("SIGKILLed %s after %d completed sends, while it ran %s", gatewayKillVictim, atKill, caught)

	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("all %d sends completed %v after the kill (%v in all); %d transport retries", gatewayKillSends, time.Since(killedAt).Round(time.Millisecond), time.Since(start0).Round(time.Millisecond), retried.Load())

	// The queue drains: every run message was acked, so nothing can be
	// redelivered (and executed again) after the checks below.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bustest.WaitFor(t, 60*time.Second, "every run finished", func() bool {
		n, err := d.Queue.Unfinished(ctx)
		return err == nil && n == 0
	})
	survivor := gws[gatewayKillSurvivor]
	select {
	case err := <-survivor.done:
		survivor.done <- err
		t.Fatalf("%s exited: %v: %s", gatewayKillSurvivor, err, survivor.errText())
	default:
	}

	// Run records: one per send, each ok exactly once.
	byRun := map[string]int{}
	for i, r := range results {
		if prev, dup := byRun[r.runID]; dup {
			t.Fatalf("sends %d and %d share run %s", prev, i, r.runID)
		}
		byRun[r.runID] = i
	}
	keys, err := d.Runs.KV().Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != gatewayKillSends {
		t.Errorf("%d run records for %d sends", len(keys), gatewayKillSends)
	}
	redelivered := map[string][]string{} // gateway => runs with Attempts > 1
	perGateway := map[string]int{}
	for i, r := range results {
		rec, _, err := d.Runs.Get(ctx, r.runID)
		if err != nil {
			t.Fatalf("run %s of send %d: %v", r.runID, i, err)
		}
		if rec.Status != runs.OK || rec.Reply != fmt.Sprintf("ok m-%03d", i) || rec.SessionKey != r.target {
			t.Errorf("send %d: run record %+v", i, rec)
		}
		if rec.Attempts < 1 || rec.Attempts > 2 {
			t.Errorf("send %d: run %s made %d attempts (want 1, or 2 after the kill)", i, r.runID, rec.Attempts)
		}
		if rec.Gateway != gatewayKillVictim && rec.Gateway != gatewayKillSurvivor {
			t.Errorf("send %d: run %s recorded on gateway %q", i, r.runID, rec.Gateway)
		}
		if rec.Attempts > 1 {
			if rec.Gateway != gatewayKillSurvivor {
				t.Errorf("send %d: run %s redelivered but finished on %s", i, r.runID, rec.Gateway)
			}
			redelivered[rec.Gateway] = append(redelivered[rec.Gateway], r.runID)
		}
		perGateway[rec.Gateway]++
	}

	// Transcripts: every (run, part) exactly once, every run has its prompt
	// and exactly one assistant reply.
	type part struct{ run, part string }
	sessions := map[string]bool{}
	for _, r := range results {
		sessions[r.target] = true
	}
	for target := range sessions {
		entries := transcriptEntries(t, d.Transcripts, target)
		counts := map[part]int{}
		for _, e := range entries {
			var m struct {
				Role    string `json:"role"`
				Content string `json:"content"`
				Marker  *struct {
					Run  string `json:"run"`
					Part string `json:"part"`
				} `json:"__sessionbus"`
			}
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatalf("%s entry %d: %v: %s", target, e.N, err, e.Data)
			}
			if m.Marker == nil {
				t.Errorf("%s entry %d has no run marker: %s", target, e.N, e.Data)
				continue
			}
			if _, ok := byRun[m.Marker.Run]; !ok {
				t.Errorf("%s entry %d belongs to unknown run %s", target, e.N, m.Marker.Run)
			}
			if (m.Marker.Part == "reply") != (m.Role == "assistant") {
				t.Errorf("%s entry %d: part %q with role %q", target, e.N, m.Marker.Part, m.Role)
			}
			counts[part{m.Marker.Run, m.Marker.Part}]++
		}
		for p, c := range counts {
			if c != 1 {
				t.Errorf("%s: run %s part %s appended %d times", target, p.run, p.part, c)
			}
		}
		for _, r := range results {
			if r.target != target {
				continue
			}
			for _, p := range []string{"prompt", "reply"} {
				if counts[part{r.runID, p}] == 0 {
					t.Errorf("%s: run %s has no %s entry", target, r.runID, p)
				}
			}
		}
	}

	for gw, runs := range redelivered {
		sort.Strings(runs)
		t.Logf("%d runs redelivered (attempts > 1) and finished on %s: %v", len(runs), gw, runs)
	}
	if len(redelivered) == 0 {
		t.Logf("no run needed a second attempt (the kill caught %s between recording running and the turn)", caught)
	}
	t.Logf("runs finished per gateway: %v", perGateway)
}
