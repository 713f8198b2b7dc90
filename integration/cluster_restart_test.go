package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

// clusterRestartConfig: a child whose task starts with "slow" runs for a
// minute (its runTimeoutSeconds ends it first); everything else, the
// announce quoting that task too, answers at once.
const clusterRestartConfig = `
bus:
  replicas: 3
  subagentSweepInterval: 500ms
agents:
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: "(?m)^\\[Subagent Task\\]: slow"
            delayMs: 60000
            reply: "too late"
          - match: ".*"
            reply: "ok {{message}}"
`

// TestClusterFullRestart stops every gateway, worker and server of a
// 3-node cluster and starts them again on the same stores. Before the
// stop: sessions with transcripts, a child running under a 3 s
// runTimeoutSeconds (a timer), then, with the gateway already down, a
// queued send (a pending run) and a human message to a watched child (a
// pending notice). After the restart every session and transcript entry is
// there once, the pending run runs, the child's deadline (passed while
// everything was down) ends it as timed out and announces it once, and the
// notice reaches the parent, which acknowledges the child's last event.
func TestClusterFullRestart(t *testing.T) {
	start0 := time.Now()
	d := newClusterDeployment(t, clusterRestartConfig)
	w := d.startWorker(t, d.connect(t, "worker", 0))
	g := d.startGateway(t, d.connect(t, "gw-a", 1), "gw-a", 5*time.Second)
	deps := w.Deps
	tok, err := d.op.Mint(bus.Caller{SessionKey: clusterCaller}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client := d.connect(t, "client", 2)
	call := func(tool string, params map[string]any, out any) {
		t.Helper()
		b, _ := json.Marshal(params)
		if _, err := faultCall(t, client, d.names, tok, tool, b, out); err != nil {
			t.Fatal(err)
		}
	}

	// sessions and transcripts
	targets := createChildren(t, w, clusterCaller, "rs", 4)
	sent := d.sendRange(t, client, tok, "rs", targets, 0, faultCount(40, 20))

	// a watched child: its spawn seeds the parent's cursor
	var watched spawnResult
	call("sessions_spawn", map[string]any{"task": "watch", "idempotencyKey": "rs-watch"}, &watched)
	// a timer: a child whose run outlives its runTimeoutSeconds
	var timed spawnResult
	call("sessions_spawn", map[string]any{"task": "slow job", "runTimeoutSeconds": 3, "idempotencyKey": "rs-timer"}, &timed)
	if watched.Status != "accepted" || timed.Status != "accepted" {
		t.Fatalf("spawns: %+v %+v", watched, timed)
	}
	var deadline int64
	bustest.WaitFor(t, 60*time.Second, "the watched child announced and the slow child running", func() bool {
		ctx := bustest.Context(t)
		wr, _, err := deps.Subagents.Get(ctx, watched.ChildSessionKey)
		if err != nil || wr.Announce == nil || wr.Announce.State != subagents.AnnounceDelivered {
			return false
		}
		if _, err := deps.Watchers.Get(ctx, clusterCaller, watched.ChildSessionKey); err != nil {
			return false
		}
		tr, _, err := deps.Subagents.Get(ctx, timed.ChildSessionKey)
		if err != nil || tr.StartedAt == 0 || tr.DeadlineAt == 0 {
			return false
		}
		deadline = tr.DeadlineAt
		return true
	})

	// every gateway down: what comes in now waits
	g.Stop()
	var pending sendResult
	call("sessions_send", map[string]any{"sessionKey": targets[0], "message": "while down", "timeoutSeconds": 0, "idempotencyKey": "rs-pending"}, &pending)
	if pending.Status != "accepted" {
		t.Fatalf("send while the gateways are down: %+v", pending)
	}
	adapter, err := d.op.Mint(bus.Caller{Adapter: "telegram"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"sessionKey": watched.ChildSessionKey, "channel": "telegram", "from": "ana", "text": "human while down", "idempotencyKey": "rs-human"})
	retryFor(t, 60*time.Second, "inbound", func(ctx context.Context) error {
		out, err := bus.Inbound(ctx, client, d.names, adapter, body)
		if err == nil && !json.Valid(out) {
			err = fmt.Errorf("inbound reply %s", out)
		}
		return err
	})

	// then every worker and server
	w.Stop()
	for i := range d.c.Len() {
		d.c.Stop(i)
	}
	stopped := time.Now()
	// the timer falls due while nothing runs
	bustest.WaitFor(t, 10*time.Second, "the slow child's deadline to pass", func() bool { return time.Now().UnixMilli() > deadline })
	for i := range d.c.Len() {
		if err := d.c.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.c.WaitMetaLeader(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("everything stopped for %v; %v since the start", time.Since(stopped).Round(time.Millisecond), time.Since(start0).Round(time.Millisecond))
	w2 := d.startWorker(t, d.connect(t, "worker 2", 2))
	g2 := d.startGateway(t, d.connect(t, "gw-b", 0), "gw-b", 5*time.Second)
	deps = w2.Deps

	// the pending run runs
	var rec *runs.Record
	retryFor(t, 90*time.Second, "the pending run", func(ctx context.Context) error {
		var err error
		rec, err = g2.Runs().Wait(ctx, pending.RunID)
		return err
	})
	if rec.Status != runs.OK || rec.Reply != "ok while down" || rec.Attempts != 1 {
		t.Errorf("pending run after the restart: %+v", rec)
	}
	// the timer fires: timed out, announced once
	bustest.WaitFor(t, 60*time.Second, "the slow child timed out and announced", func() bool {
		r := deps.Children.Get(timed.ChildSessionKey)
		return r != nil && r.Outcome == subagents.OutcomeTimeout && r.Announce != nil && r.Announce.State == subagents.AnnounceDelivered
	})
	// the notice arrives and the parent acknowledges the child's last event
	var last string
	defer func() {
		if t.Failed() {
			t.Log("at the last look:", last)
		}
	}()
	bustest.WaitFor(t, 60*time.Second, "the notice delivered and acknowledged, every run finished", func() bool {
		ctx := bustest.Context(t)
		head, err := deps.Notices.Log.StateVersion(ctx, watched.ChildSessionKey)
		if err != nil {
			last = "state version: " + err.Error()
			return false
		}
		c, err := deps.Watchers.Get(ctx, clusterCaller, watched.ChildSessionKey)
		if err != nil || c.LastSeenSequence != head || c.NotifiedSequence != head || c.MaterialSequence != head {
			last = fmt.Sprintf("head %d cursor %+v %v", head, c, err)
			return false
		}
		n, err := deps.Queue.Unfinished(ctx)
		last = fmt.Sprintf("unfinished %d %v", n, err)
		if n > 0 {
			if keys, err := g2.Runs().KV().Keys(ctx); err == nil {
				for _, k := range keys {
					if r, _, err := g2.Runs().Get(ctx, k); err == nil && !r.Terminal() {
						last += fmt.Sprintf("\n  %+v", r)
					}
				}
			}
			if js, err := jetstream.New(client); err == nil {
				if kv, err := js.KeyValue(ctx, d.names.Bucket("lanes")); err == nil {
					if keys, err := kv.Keys(ctx); err == nil {
						for _, k := range keys {
							if e, err := kv.Get(ctx, k); err == nil {
								last += fmt.Sprintf("\n  lane %s rev %d created %v: %s", k, e.Revision(), e.Created(), e.Value())
							}
						}
					}
				}
			}
			if r, _, err := g2.Runs().Get(ctx, timed.RunID); err == nil {
				last += fmt.Sprintf("\n  slow child's run %+v", r)
			}
			if c, err := deps.Queue.Stream().Consumer(ctx, d.names.GatewaysConsumer()); err == nil {
				ci := c.CachedInfo()
				last += fmt.Sprintf("\n  consumer pending %d ackPending %d redelivered %d delivered %+v ackFloor %+v", ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.Delivered, ci.AckFloor)
			}
		}
		return err == nil && n == 0
	})

	// sessions and transcripts: everything once
	for _, k := range append(targets, clusterCaller, watched.ChildSessionKey, timed.ChildSessionKey) {
		if deps.Index.Get(k) == nil {
			t.Errorf("session %s missing after the restart", k)
		}
	}
	checkSends(t, deps, "rs", targets, sent)
	checkRunParts(t, deps.Transcripts, targets[0], []string{pending.RunID})
	perChild, _ := announcesIn(t, deps.Transcripts, clusterCaller)
	if perChild[watched.ChildSessionKey] != 1 || perChild[timed.ChildSessionKey] != 1 || len(perChild) != 2 {
		t.Errorf("announces in the parent: %v", perChild)
	}
	notices := 0
	for _, m := range transcriptOf(t, deps, clusterCaller) {
		if m.Role == "user" && noticeLine.MatchString(m.Content) {
			if k := noticeLine.FindStringSubmatch(m.Content); k[1] == watched.ChildSessionKey {
				notices++
			}
		}
	}
	if notices != 1 {
		t.Errorf("%d notices of %s in the parent, want 1", notices, watched.ChildSessionKey)
	}
	t.Logf("checked %v after the start", time.Since(start0).Round(time.Millisecond))
}
