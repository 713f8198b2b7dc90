package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The sessions_send benchmarks: send-and-wait through
// NATS with a real token, from agent:main:main to sessions it spawned (so
// the A2A flow is skipped: delivery "skipped"), executed by one or two
// gateway replicas on their own connections, with the script runtime.

const (
	sendTargetFmt = "agent:main:bench:send:t%d"
	sendSenders   = 32
	sendDelayMs   = 20
)

// sendParamsJSON is the tool call of every send benchmark: wait up to 30 s.
func sendParamsJSON(target string) []byte {
	b, _ := json.Marshal(map[string]any{"sessionKey": target, "message": "ping", "timeoutSeconds": 30})
	return b
}

// ensureSendTargets creates the target sessions (spawned by the requester)
// and waits until the worker's index has them.
func (e *env) ensureSendTargets(ctx context.Context, n int) error {
	if e.sendTargets >= n {
		return nil
	}
	from := e.sendTargets
	return e.timed(fmt.Sprintf("send targets: %d to %d sessions spawned by %s", from, n, requesterKey), n-from, func() error {
		store, err := sessions.Open(ctx, e.js, e.names)
		if err != nil {
			return err
		}
		now := time.Now().UnixMilli()
		depth := 1
		for i := from; i < n; i++ {
			_, err := store.Create(ctx, &sessions.Entry{
				Key: fmt.Sprintf(sendTargetFmt, i), AgentID: "main", SessionID: sessions.NewID(),
				CreatedAt: now, UpdatedAt: now, SpawnedBy: requesterKey, SpawnDepth: &depth,
				Label: fmt.Sprintf("bench send target %d", i),
			})
			if err != nil && !errors.Is(err, sessions.ErrExists) {
				return err
			}
		}
		if err := e.worker.Deps.Index.Sync(ctx); err != nil {
			return err
		}
		for i := from; i < n; i++ {
			if e.worker.Deps.Index.Get(fmt.Sprintf(sendTargetFmt, i)) == nil {
				return fmt.Errorf("worker index lacks send target %d", i)
			}
		}
		e.sendTargets = n
		return nil
	})
}

// gateways starts n gateway replicas, each on its own NATS connection, with
// agent main's script runtime delaying every reply by delayMs (0: echo, no
// rules). stop stops them and closes their connections.
func (e *env) gateways(ctx context.Context, n, delayMs, executors int) (stop func(), err error) {
	cfg := *e.cfg
	main := config.Agent{ID: "main", Runtime: "script"}
	if delayMs > 0 {
		main.Script = map[string]any{"rules": []any{map[string]any{"match": ".*", "delayMs": delayMs, "reply": "ok"}}}
	}
	cfg.Agents.List = []config.Agent{main}
	return e.startGateways(ctx, n, "bench-gw", &cfg, gateway.Options{Concurrency: executors})
}

// startGateways starts n gateways with cfg, named prefix1, prefix2, ...,
// each on its own NATS connection. stop stops them and closes their
// connections.
func (e *env) startGateways(ctx context.Context, n int, prefix string, cfg *config.Config, opts gateway.Options) (stop func(), err error) {
	var gws []*gateway.Gateway
	var conns []*nats.Conn
	stop = func() {
		for _, g := range gws {
			g.Stop()
		}
		for _, c := range conns {
			c.Close()
		}
	}
	glog := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s%d", prefix, i+1)
		nc, err := e.connectInternal("bench " + id)
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, nc)
		g, err := gateway.StartWithOptions(sctx, nc, cfg, e.op, id, glog, opts)
		if err != nil {
			stop()
			return nil, fmt.Errorf("start gateway %s: %w", id, err)
		}
		gws = append(gws, g)
	}
	return stop, nil
}

type sendReply struct {
	Status   string `json:"status"`
	Reply    string `json:"reply"`
	Error    string `json:"error"`
	Delivery *struct {
		Status string `json:"status"`
	} `json:"delivery"`
}

// send is one sessions_send call that must complete with status ok.
func (e *env) send(ctx context.Context, params []byte) ([]byte, error) {
	out, err := bus.Call(ctx, e.nc, e.names, e.token, "sessions_send", params)
	if err != nil {
		return nil, err
	}
	var r sendReply
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("sessions_send reply: %w: %.300s", err, out)
	}
	if r.Status != "ok" {
		return nil, fmt.Errorf("sessions_send status %q (%s): %.300s", r.Status, r.Error, out)
	}
	return out, nil
}

// checkFirstSend makes one send and checks its shape: ok, the reply wanted,
// delivery skipped (no A2A flow).
func (e *env) checkFirstSend(ctx context.Context, target, wantReply string) (int, error) {
	out, err := e.send(ctx, sendParamsJSON(target))
	if err != nil {
		return 0, err
	}
	var r sendReply
	_ = json.Unmarshal(out, &r)
	if r.Reply != wantReply || r.Delivery == nil || r.Delivery.Status != "skipped" {
		return 0, fmt.Errorf("sessions_send reply %q delivery %+v, want %q and skipped: %.300s", r.Reply, r.Delivery, wantReply, out)
	}
	return len(out), nil
}

// send_wait: sequential send-and-wait to one spawned session, one gateway,
// script runtime with no rules (echo).
func runSendWait(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSendTargets(ctx, 1); err != nil {
		return Result{}, err
	}
	stop, err := e.gateways(ctx, 1, 0, gateway.DefaultConcurrency)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	target := fmt.Sprintf(sendTargetFmt, 0)
	n, err := e.checkFirstSend(cctx, target, "ping")
	if err != nil {
		return Result{}, err
	}
	params := sendParamsJSON(target)
	r, err := measure(ctx, e.sz.send, func() error {
		_, err := e.send(cctx, params)
		return err
	})
	r.Dataset = "sessions_send timeoutSeconds 30 to 1 spawned session (delivery skipped), 1 gateway, script echo"
	r.ReplyBytes = n
	return r, err
}

func runSendThroughput1gw(ctx context.Context, e *env) (Result, error) {
	return e.runSendThroughput(ctx, "send_throughput_1gw", 1, 0)
}

func runSendThroughput2gw(ctx context.Context, e *env) (Result, error) {
	return e.runSendThroughput(ctx, "send_throughput_2gw", 2, 0)
}

func runSendThroughput1gwDelay20(ctx context.Context, e *env) (Result, error) {
	return e.runSendThroughput(ctx, "send_throughput_1gw_delay20", 1, sendDelayMs)
}

func runSendThroughput2gwDelay20(ctx context.Context, e *env) (Result, error) {
	return e.runSendThroughput(ctx, "send_throughput_2gw_delay20", 2, sendDelayMs)
}

// runSendThroughput: 32 concurrent senders, each sending to its own spawned
// session (a lane runs one turn per session at a time) and waiting for the
// reply, a fixed number of sends in all, against gws gateways. ops_per_sec
// is completed send-and-wait calls / wall time; p50/p99 are per call.
func (e *env) runSendThroughput(ctx context.Context, name string, gws, delayMs int) (Result, error) {
	if err := e.ensureSendTargets(ctx, sendSenders); err != nil {
		return Result{}, err
	}
	// With a 20 ms turn, fewer executors per gateway than senders, so the
	// second gateway has work to take: the scaling bar measures sharing, not
	// one gateway's idle headroom.
	executors := gateway.DefaultConcurrency
	if delayMs > 0 {
		executors = sendSenders / 2
	}
	stop, err := e.gateways(ctx, gws, delayMs, executors)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	cctx, cancel := opCtx(ctx)
	defer cancel()
	want := "ping"
	if delayMs > 0 {
		want = "ok"
	}
	n, err := e.checkFirstSend(cctx, fmt.Sprintf(sendTargetFmt, 0), want)
	if err != nil {
		return Result{}, err
	}
	r, err := measureConcurrent(cctx, sendSenders, e.sz.sendTput, func(w int) func() error {
		params := sendParamsJSON(fmt.Sprintf(sendTargetFmt, w))
		return func() error {
			_, err := e.send(cctx, params)
			return err
		}
	})
	if err != nil {
		return Result{}, err
	}
	delay := "no delay (echo)"
	if delayMs > 0 {
		delay = fmt.Sprintf("delayMs %d", delayMs)
	}
	r.Dataset = fmt.Sprintf("%d senders x %d send-and-wait each (1 session per sender, delivery skipped), %d gateway(s) x %d executors, script %s",
		sendSenders, e.sz.sendTput.ops/sendSenders, gws, executors, delay)
	r.ReplyBytes = n
	key := fmt.Sprintf("d%d", delayMs)
	if gws == 1 {
		e.sendTput1gw[key] = r.OpsPerSec
	} else if one, ok := e.sendTput1gw[key]; ok && one > 0 {
		r.ThroughputVs1gw = f64(round(r.OpsPerSec/one, 3))
	}
	return r, nil
}

// measureConcurrent runs workers goroutines; each first makes warm/workers
// untimed calls, then all start together on ops/workers timed calls each.
// Latency is per call; ops_per_sec = completed calls / wall time of the
// timed phase.
func measureConcurrent(ctx context.Context, workers int, p plan, mk func(worker int) func() error) (Result, error) {
	per := max(p.ops/workers, 1)
	warm := max(p.warm/workers, 1)
	ops := make([]func() error, workers)
	for w := range ops {
		ops[w] = mk(w)
	}
	run := func(n int, samples [][]time.Duration) (time.Duration, error) {
		var wg sync.WaitGroup
		errs := make([]error, workers)
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					if ctx.Err() != nil {
						errs[w] = ctx.Err()
						return
					}
					t0 := time.Now()
					if err := ops[w](); err != nil {
						errs[w] = fmt.Errorf("sender %d op %d: %w", w, i, err)
						return
					}
					if samples != nil {
						samples[w][i] = time.Since(t0)
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start), errors.Join(errs...)
	}
	runtime.GC()
	if _, err := run(warm, nil); err != nil {
		return Result{}, fmt.Errorf("warm-up: %w", err)
	}
	runtime.GC()
	samples := make([][]time.Duration, workers)
	for w := range samples {
		samples[w] = make([]time.Duration, per)
	}
	cpu0 := processCPU()
	wall, err := run(per, samples)
	cpu := processCPU() - cpu0
	if err != nil {
		return Result{}, err
	}
	all := make([]time.Duration, 0, workers*per)
	for _, s := range samples {
		all = append(all, s...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return Result{
		Ops:       len(all),
		P50:       int64(percentile(all, 0.50)),
		P99:       int64(percentile(all, 0.99)),
		OpsPerSec: round(float64(len(all))/wall.Seconds(), 1),
		CPUPerOp:  cpuPerOp(cpu, len(all)),
	}, nil
}
