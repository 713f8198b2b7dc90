package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers"
)

// The *_1m rows: the list family, session_status and a worker's cold start
// over a million sessions (docs/scale.md), against the 10k rows and the raw
// baselines of the same run.

func runList1M(ctx context.Context, e *env) (Result, error) { return e.runList(ctx, e.sz.list1m) }

func runListLabel1M(ctx context.Context, e *env) (Result, error) {
	return e.runListFiltered(ctx, e.sz.list1m, "label")
}

func runListSearch1M(ctx context.Context, e *env) (Result, error) {
	return e.runListFiltered(ctx, e.sz.list1m, "search")
}

// session_status_1m: session_status with a million sessions indexed.
func runSessionStatus1M(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSessions(ctx, e.sz.list1m); err != nil {
		return Result{}, err
	}
	r, err := runSessionStatus(ctx, e)
	r.Dataset += fmt.Sprintf(", %d sessions indexed", e.worker.Deps.Index.Len())
	return r, err
}

// history_offset_deep: a page 90% of the way back into the 1M-entry
// transcript (offset 900,000).
func runHistoryOffsetDeep(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSingle(ctx); err != nil {
		return Result{}, err
	}
	off := e.sz.singleN / 10 * 9
	return e.runHistory(ctx, singleKey, off, e.sz.singleN, false,
		fmt.Sprintf("limit %d, offset %d, a %d-entry session", page, off, e.sz.singleN))
}

// raw_kv_watch_1m: nats.go's KV watch of the sessions bucket from its
// start to the end-of-initial-values marker, values received and dropped:
// the floor of any process that reads the bucket whole.
func runRawKVWatch1M(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSessions(ctx, e.sz.list1m); err != nil {
		return Result{}, err
	}
	// the worker's in-process connection: the one worker_cold_start_1m's
	// worker loads over
	js, err := jetstream.New(e.workerNC)
	if err != nil {
		return Result{}, err
	}
	kv, err := js.KeyValue(ctx, e.names.SessionsBucket())
	if err != nil {
		return Result{}, err
	}
	r, err := measure(ctx, e.sz.cold, func() error {
		// bounded: a watch that stalls fails the row instead of the run hanging
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		w, err := kv.WatchAll(cctx, jetstream.IgnoreDeletes())
		if err != nil {
			return err
		}
		defer func() { _ = w.Stop() }()
		n := 0
	read:
		for {
			select {
			case ke := <-w.Updates():
				if ke == nil {
					break read
				}
				n++
			case <-cctx.Done():
				return fmt.Errorf("watch stalled after %d entries: %w", n, cctx.Err())
			}
		}
		if n < e.sz.list1m {
			return fmt.Errorf("watch ended after %d entries, want at least %d", n, e.sz.list1m)
		}
		return nil
	})
	r.Dataset = fmt.Sprintf("the sessions bucket, %d entries (~%d B each), to the end-of-initial-values marker, over the worker's in-process connection", e.sessions, avgEntryBytes())
	return r, err
}

func avgEntryBytes() int {
	n := 0
	for i := range 10 {
		b, _ := json.Marshal(listEntry(i, 0))
		n += len(b)
	}
	return n / 10
}

// worker_cold_start_1m: the bench's worker stopped, a new one started on
// its connection, until it answers its first sessions_list (limit 100):
// every start-up step, the session index's load of the bucket the longest.
// No other worker runs, so the call waits for the new one.
func runWorkerColdStart1M(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSessions(ctx, e.sz.list1m); err != nil {
		return Result{}, err
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	r, err := measureSpans(ctx, e.sz.cold, func() (time.Duration, error) {
		e.worker.Stop()
		e.worker = nil
		start := time.Now()
		w, err := handlers.StartWorker(cctx, e.workerNC, e.cfg, bus.NewVerifier(e.op.PublicKey()), e.wlog)
		if err != nil {
			return 0, fmt.Errorf("start the worker: %w", err)
		}
		e.worker = w
		if err := e.checkFullPage(cctx); err != nil {
			return 0, err
		}
		took := time.Since(start)
		// the index's trigram lists are built after it answers: the next
		// span and the benchmarks after this one find them whole
		if err := w.Deps.Index.WaitSearch(cctx); err != nil {
			return 0, err
		}
		return took, nil
	})
	r.Dataset = fmt.Sprintf("a worker started against %d sessions, to its first sessions_list reply", e.sessions)
	return r, err
}

// checkFullPage calls sessions_list limit 100 and checks a full page came back.
func (e *env) checkFullPage(ctx context.Context) error {
	out, err := bus.Call(ctx, e.nc, e.names, e.token, "sessions_list", []byte(`{"limit":100}`))
	if err != nil {
		return err
	}
	var chk struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal(out, &chk); err != nil || chk.Count != 100 {
		return fmt.Errorf("sessions_list: count %d (%v): %.300s", chk.Count, err, out)
	}
	return nil
}

// list_restart_1m: three workers serve; the caller's sessions_list (limit
// 100) is timed quiet, then while one of the three restarts again and
// again (Shutdown, which drains, then a new worker that joins the service
// only once its index is loaded). The timed calls run until at least two
// restarts completed and the plan's count of calls is made.
func runListRestart1M(ctx context.Context, e *env) (res Result, err error) {
	if err := e.ensureSessions(ctx, e.sz.list1m); err != nil {
		return Result{}, err
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	var others []*handlers.Worker
	var ncs []*nats.Conn
	defer func() {
		for _, w := range others {
			w.Stop()
		}
	}()
	for i := range 2 {
		nc, err := e.connectInternal(fmt.Sprintf("bench worker %d", i+2))
		if err != nil {
			return Result{}, err
		}
		defer nc.Close()
		ncs = append(ncs, nc)
		w, err := handlers.StartWorker(cctx, nc, e.cfg, bus.NewVerifier(e.op.PublicKey()), e.wlog)
		if err != nil {
			return Result{}, err
		}
		others = append(others, w)
	}
	list := func() error { return e.checkFullPage(cctx) }
	quiet, err := measure(ctx, e.sz.list, list)
	if err != nil {
		return Result{}, fmt.Errorf("quiet: %w", err)
	}
	var restarts atomic.Int64
	var restartErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			others[1].Shutdown(bus.DefaultShutdownGrace)
			w, err := handlers.StartWorker(cctx, ncs[1], e.cfg, bus.NewVerifier(e.op.PublicKey()), e.wlog)
			if err != nil {
				restartErr = err
				return
			}
			others[1] = w
			restarts.Add(1)
		}
	})
	var samples []time.Duration
	failed := 0
	gc0, cpu0, t0 := readGC(), processCPU(), time.Now()
	for len(samples) < e.sz.list.ops || restarts.Load() < 2 {
		if ctx.Err() != nil || restartErr != nil {
			break
		}
		s := time.Now()
		if err := list(); err != nil {
			failed++
			if failed == 1 {
				e.logf("list_restart_1m: a call failed: %v", err)
			}
		}
		samples = append(samples, time.Since(s))
	}
	wall, cpu, gc := time.Since(t0), processCPU()-cpu0, readGC().since(gc0)
	close(stop)
	wg.Wait()
	if restartErr != nil {
		return Result{}, fmt.Errorf("restart: %w", restartErr)
	}
	slices.Sort(samples)
	res = Result{Ops: len(samples), P50: int64(percentile(samples, 0.5)), P99: int64(percentile(samples, 0.99)),
		OpsPerSec: round(float64(len(samples))/wall.Seconds(), 1), QuietP50: quiet.P50, QuietP99: quiet.P99,
		CPUPerOp: cpuPerOp(cpu, len(samples))}
	gc.set(&res)
	if quiet.P99 > 0 {
		res.RestartP99Ratio = f64(round(float64(res.P99)/float64(quiet.P99), 2))
	}
	n := int(restarts.Load())
	res.Restarts, res.FailedCalls = &n, &failed
	res.Dataset = fmt.Sprintf("sessions_list limit 100 of %d sessions, 3 workers, quiet then while one restarts (stop with drain, start, index load)", e.sessions)
	return res, nil
}
