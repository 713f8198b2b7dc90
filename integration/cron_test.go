package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/cronjobs"
	"github.com/sessionbus/sessionbus/kv/runs"
)

const cronClusterYAML = `
bus: {replicas: 3}
agents:
  list:
    - id: main
      runtime: script
      script: {rules: [{reply: "tick done"}]}
`

// TestCronOncePerTickThroughFaults: a job ticking every second for 30 s,
// over two worker and two gateway processes on a 3-node cluster, runs
// once a second (give or take the faults' edges) and never twice for one
// tick, while one worker and one gateway are SIGKILLed and the node
// leading SB_CRON is stopped and started again; every run it started
// ends ok on the surviving gateway.
func TestCronOncePerTickThroughFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("long: 30 s of ticks on a cluster (go test -short skips it)")
	}
	d := newClusterDeployment(t, cronClusterYAML)
	nc := d.connect(t, "cron-test", -1)
	urls := d.c.URLs()
	run := func(args ...string) *proc {
		p := start(t, append(args, "--server", urls, "--creds", d.creds, "--config", d.cfgPath, "--log-level", "warn")...)
		return p
	}
	w1, w2 := run("worker"), run("worker")
	w1.waitLine(t, "ready ")
	w2.waitLine(t, "ready ")
	g1 := run("gateway", "--id", "gw-1", "--ack-wait", "2s")
	g1.waitLine(t, "ready gw-1")
	g2 := run("gateway", "--id", "gw-2", "--ack-wait", "2s")
	g2.waitLine(t, "ready gw-2")

	tok, err := d.op.Mint(bus.Caller{Adapter: bus.AnyChannel}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cronOp := func(op string, body any) []byte {
		b, _ := json.Marshal(body)
		var reply []byte
		retryFor(t, 60*time.Second, "cron "+op, func(ctx context.Context) error {
			var err error
			reply, err = bus.CronOp(ctx, nc, d.names, op, tok, b)
			return err
		})
		return reply
	}
	var job cronjobs.Job
	if err := json.Unmarshal(cronOp("add", map[string]any{
		"name": "heartbeat", "schedule": map[string]any{"kind": "every", "everyMs": 1000},
		"payload": map[string]any{"kind": "agentTurn", "message": "beat"}, "delivery": map[string]any{"mode": "none"},
	}), &job); err != nil || job.ID == "" {
		t.Fatalf("add: %v %+v", err, job)
	}
	began := time.Now()
	jobs, err := cronjobs.Open(bustest.Context(t), mustJS(t, nc), d.names)
	if err != nil {
		t.Fatal(err)
	}
	history := func() []*cronjobs.Run {
		var h []*cronjobs.Run
		retryFor(t, 60*time.Second, "read the run history", func(ctx context.Context) error {
			var err error
			h, err = jobs.Runs(ctx, job.ID)
			return err
		})
		return h
	}
	atLeast := func(n int, what string) {
		bustest.WaitFor(t, 90*time.Second, what, func() bool { return len(history()) >= n })
	}
	atLeast(6, "six runs")
	sigkill(t, w1)
	sigkill(t, g1)
	t.Logf("%s killed a worker and a gateway", time.Now().Format("15:04:05.000"))
	n := len(history())
	atLeast(n+6, "six runs after the kills")
	t.Logf("%s stopping the leader of %s", time.Now().Format("15:04:05.000"), d.names.CronStream())
	victim := d.killStreamLeader(t, d.names.CronStream())
	t.Logf("restarted %s, which led %s", d.c.Name(victim), d.names.CronStream())
	n = len(history())
	atLeast(n+6, "six runs after the leader's restart")
	bustest.WaitFor(t, 60*time.Second, "30 s of ticks", func() bool { return time.Since(began) >= 30*time.Second })
	cronOp("disable", map[string]any{"jobId": job.ID})
	elapsed := time.Since(began)

	h := history()
	ticks, ids := map[string]bool{}, map[string]bool{}
	for _, r := range h {
		if ticks[r.Tick] || ids[r.RunID] {
			t.Fatalf("tick %s ran twice", r.Tick)
		}
		ticks[r.Tick], ids[r.RunID] = true, true
	}
	secs := int(elapsed.Seconds())
	t.Logf("%d runs in %v", len(h), elapsed.Round(time.Millisecond))
	for i := 1; i < len(h); i++ { // where ticks went missing, for a failure's reader
		if gap := time.Duration(h[i].ScheduleAt-h[i-1].ScheduleAt) * time.Millisecond; gap > 1500*time.Millisecond {
			t.Logf("no run for %v before the tick due %s (started %s)", gap, time.UnixMilli(h[i].ScheduleAt).Format("15:04:05.000"), time.UnixMilli(h[i].StartedAt).Format("15:04:05.000"))
		}
	}
	// each fault may cost the tick in hand (a killed worker's, the stopped
	// leader's election); none may add one
	if len(h) < secs-6 || len(h) > secs+2 {
		for name, p := range map[string]*proc{"worker 2": w2, "gateway 2": g2} {
			t.Logf("%s's stderr:\n%s", name, p.errText())
		}
		t.Fatalf("%d runs in %v: want one a second", len(h), elapsed)
	}
	js := mustJS(t, nc)
	recs, err := runs.Open(bustest.Context(t), js, d.names)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range h {
		bustest.WaitFor(t, 90*time.Second, "run "+r.RunID+" ends ok", func() bool {
			rec, _, err := recs.Get(context.Background(), r.RunID)
			return err == nil && rec.Status == runs.OK
		})
	}
}

func mustJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
