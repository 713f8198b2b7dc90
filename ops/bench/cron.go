package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/cronjobs"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// The cron rows: a job's tick to its run, and what idle jobs cost the
// server. The worker in the bench process takes the ticks.

// cronOp sends one cron operation with an ops token.
func (e *env) cronOp(ctx context.Context, op string, body any) ([]byte, error) {
	tok, err := e.op.Mint(bus.Caller{Adapter: bus.AnyChannel}, time.Hour)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(body)
	return bus.CronOp(ctx, e.nc, e.names, op, tok, b)
}

func (e *env) cronAdd(ctx context.Context, job map[string]any) (string, error) {
	reply, err := e.cronOp(ctx, "add", job)
	if err != nil {
		return "", err
	}
	var j struct{ ID string }
	if err := json.Unmarshal(reply, &j); err != nil || j.ID == "" {
		return "", fmt.Errorf("cron add replied %q: %v", reply, err)
	}
	return j.ID, nil
}

// cron_tick_to_run: a job every second; per op, the span from the tick's
// scheduled time (the second the server fires it on) to the run record
// the worker created for it (its createdAt): the server's scheduler, the
// stored tick, the consumer's delivery, the job read and the run's start.
// Millisecond resolution: the record's clock.
func runCronTickToRun(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	id, err := e.cronAdd(cctx, map[string]any{
		"name": "bench pulse", "schedule": map[string]any{"kind": "every", "everyMs": 1000},
		"payload": map[string]any{"kind": "agentTurn", "message": "pulse"}, "delivery": map[string]any{"mode": "none"},
	})
	if err != nil {
		return Result{}, err
	}
	defer func() { _, _ = e.cronOp(context.WithoutCancel(cctx), "rm", map[string]any{"jobId": id}) }()
	jobs, err := cronjobs.Open(cctx, e.js, e.names)
	if err != nil {
		return Result{}, err
	}
	recs, err := runs.Open(cctx, e.js, e.names)
	if err != nil {
		return Result{}, err
	}
	seen := map[string]bool{}
	next := func() (time.Duration, error) {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			hist, err := jobs.Runs(cctx, id)
			if err != nil {
				return 0, err
			}
			for _, h := range hist {
				if seen[h.Tick] {
					continue
				}
				seen[h.Tick] = true
				rec, _, err := recs.Get(cctx, h.RunID)
				if err != nil {
					return 0, err
				}
				return time.Duration(rec.CreatedAt-h.ScheduleAt) * time.Millisecond, nil
			}
			time.Sleep(50 * time.Millisecond) // polling the history for the next tick, not a sync
		}
		return 0, fmt.Errorf("no tick of job %s within 10s", id)
	}
	p := plan{warm: 1, ops: 20}
	if e.o.Quick {
		p = plan{warm: 1, ops: 3}
	}
	r, err := measureSpans(ctx, p, next)
	r.Dataset = "one job every 1s, the bench worker taking its ticks; ms resolution"
	// cpu_us_per_op is the process's CPU over each op's second: one tick,
	// its run, and the idle fleet around it
	return r, err
}

// cron_idle_10k: 10,000 jobs on a daily schedule that does not fire
// during the run; ops is the jobs added, p50/p99 one add (validation,
// the job's write, its schedule's publish). It reports the process's
// heap per job after a collection (the server's schedules and their
// stream and bucket, the worker's nothing: it holds no job in memory) and
// the process's CPU per minute while the jobs sit idle, against the same
// window measured before they were added.
func runCronIdle10k(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	n, window := 10_000, 20*time.Second
	if e.o.Quick {
		n, window = 200, 2*time.Second
	}
	idleCPU := func() time.Duration {
		c0 := processCPU()
		time.Sleep(window) // measuring idle CPU over a wall-clock window, not a sync
		return processCPU() - c0
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before, quiet := heap(), idleCPU()
	ids := make([]string, 0, n)
	r, err := measure(ctx, plan{ops: n}, func() error {
		id, err := e.cronAdd(cctx, map[string]any{
			"name": fmt.Sprintf("idle %d", len(ids)), "schedule": map[string]any{"kind": "cron", "expr": "0 3 * * *", "tz": "UTC"},
			"payload": map[string]any{"kind": "agentTurn", "message": "never in this run"}, "delivery": map[string]any{"mode": "none"},
		})
		ids = append(ids, id)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	defer func() {
		for _, id := range ids {
			_, _ = e.cronOp(context.WithoutCancel(cctx), "rm", map[string]any{"jobId": id})
		}
	}()
	after, busy := heap(), idleCPU()
	perMin := func(d time.Duration) float64 {
		return round(float64(d)/float64(time.Millisecond)*float64(time.Minute)/float64(window), 1)
	}
	r.BytesPerJob = f64(round(float64(int64(after)-int64(before))/float64(n), 1))
	r.IdleCPUPerMin = f64(perMin(busy))
	r.Dataset = fmt.Sprintf("%d idle jobs (daily cron, UTC); idle CPU %.1f ms/min with them, %.1f ms/min before (process: server, worker, client)", n, perMin(busy), perMin(quiet))
	return r, nil
}
