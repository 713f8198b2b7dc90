package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers"
)

// flood_p99 asks whether a caller over its quota hurts another caller: B
// (the bench's requester, agent:main:main) measures sessions_list
// {"limit":100} over the list_10k inventory, quiet, then while A
// (floodKey, another session of agent main, so a call of A that passes
// costs what one of B's does) calls sessions_list from floodClients
// goroutines as fast as they can and is refused nearly every call with a
// 429. The bar: B's flooded p99 stays under 3x its quiet p99.
//
// It runs on a worker of its own whose tool-call quotas have the default
// rates; the per-session burst is raised to what B spends in both phases,
// so B, which calls sequentially at thousands a second, is never refused,
// and agent main's burst to what A and B spend together. A spends its
// burst before B starts measuring (the flood is on from A's first 429),
// then passes at the default 20 a second and is refused the rest; as it
// never waits its retry-after, its 429s come late (held by the worker), so
// its loops run at the pace of the quota.
const (
	floodKey     = "agent:main:flood"
	floodClients = 4 // concurrent requests of A, over two connections
	// floodMinWindow is the shortest time A's answers are counted over.
	floodMinWindow = 2 * time.Second
)

func runFloodP99(ctx context.Context, e *env) (res Result, err error) {
	if err := e.ensureSessions(ctx, e.sz.list10k); err != nil {
		return Result{}, err
	}
	q := config.DefaultQuotas()
	spent := 2*(e.sz.list.warm+e.sz.list.ops) + 1000 // B's calls in both phases, and a margin
	q.ToolCallsPerSession.Burst, q.ToolCallsPerAgent.Burst = spent, 3*spent
	cfg := *e.cfg // only the quotas differ
	cfg.Quotas = q
	if err := e.restartWorker(ctx, &cfg); err != nil {
		return Result{}, err
	}
	defer func() {
		if rerr := e.restartWorker(ctx, e.cfg); rerr != nil && err == nil {
			err = rerr
		}
	}()
	tokA, err := e.op.Mint(bus.Caller{SessionKey: floodKey}, 24*time.Hour)
	if err != nil {
		return Result{}, err
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	params := []byte(`{"limit":100}`)
	list := func() error {
		_, err := bus.Call(cctx, e.nc, e.names, e.token, "sessions_list", params)
		return err
	}
	quiet, err := measure(ctx, e.sz.list, list)
	if err != nil {
		return Result{}, fmt.Errorf("quiet: %w", err)
	}
	f, err := e.startFlood(ctx, tokA, params)
	if err != nil {
		return Result{}, err
	}
	defer f.stop()
	select {
	case <-f.refusing:
	case <-time.After(2 * time.Minute):
		return Result{}, fmt.Errorf("the flooding caller got no 429 in 2m (%d calls passed)", f.ok.Load())
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	ok0, refused0, t0 := f.ok.Load(), f.refused.Load(), time.Now()
	res, err = measure(ctx, e.sz.list, list)
	if err != nil {
		return Result{}, fmt.Errorf("flooded: %w", err)
	}
	// A's share of refusals is counted over at least floodMinWindow: A's
	// 429s come back late (held by the worker), so a window as short as
	// --quick's (tens of milliseconds) saw only A's passing calls.
	if rest := floodMinWindow - time.Since(t0); rest > 0 {
		select {
		case <-time.After(rest):
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	took := time.Since(t0)
	passed, refused := f.ok.Load()-ok0, f.refused.Load()-refused0
	f.stop()
	if err := f.failure(); err != nil {
		return Result{}, err
	}
	res.Dataset = fmt.Sprintf("sessions_list limit 100 of %d sessions, quiet then while %d concurrent callers on one other token of agent main are refused (tool-call quotas at the default rates, per-session burst %d)",
		e.sz.list10k, floodClients, spent)
	res.QuietP50, res.QuietP99 = quiet.P50, quiet.P99
	if quiet.P99 > 0 {
		res.FloodP99Ratio = f64(round(float64(res.P99)/float64(quiet.P99), 2))
	}
	res.FloodPerSec = f64(round(float64(passed+refused)/took.Seconds(), 0))
	if passed+refused > 0 {
		res.FloodRefused = f64(round(float64(refused)/float64(passed+refused), 4))
	}
	return res, nil
}

// restartWorker replaces the bench's worker by one with cfg, on the same
// connection; its session index loads again.
func (e *env) restartWorker(ctx context.Context, cfg *config.Config) error {
	if e.worker != nil {
		e.worker.Stop()
		e.worker = nil
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	w, err := handlers.StartWorker(sctx, e.workerNC, cfg, bus.NewVerifier(e.op.PublicKey()), e.wlog)
	if err != nil {
		return fmt.Errorf("restart the worker: %w", err)
	}
	e.worker = w
	return nil
}

// flood is the flooding caller: its goroutines, and what they were told.
type flood struct {
	ok, refused atomic.Int64
	refusing    chan struct{} // closed at the first 429
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	once        sync.Once
	mu          sync.Mutex
	err         error // the first answer that was neither a reply nor a 429
}

func (e *env) startFlood(ctx context.Context, token string, params []byte) (*flood, error) {
	conns := make([]*nats.Conn, 2)
	for i := range conns {
		nc, err := e.connectClient(fmt.Sprintf("bench flood %d", i))
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return nil, err
		}
		conns[i] = nc
	}
	fctx, cancel := context.WithCancel(ctx)
	f := &flood{refusing: make(chan struct{}), cancel: cancel}
	var refusedOnce sync.Once
	for i := range floodClients {
		nc := conns[i%len(conns)]
		f.wg.Go(func() {
			for fctx.Err() == nil {
				cctx, cancel := context.WithTimeout(fctx, time.Minute)
				_, err := bus.Call(cctx, nc, e.names, token, "sessions_list", params)
				cancel()
				var be *bus.Error
				switch {
				case err == nil:
					f.ok.Add(1)
				case errors.As(err, &be) && be.Code == bus.CodeTooManyRequests:
					f.refused.Add(1)
					refusedOnce.Do(func() { close(f.refusing) })
				case fctx.Err() != nil:
				default:
					f.fail(err)
					return
				}
			}
		})
	}
	f.wg.Go(func() {
		<-fctx.Done()
		for _, c := range conns {
			c.Close()
		}
	})
	return f, nil
}

func (f *flood) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = fmt.Errorf("flooding caller: %w", err)
	}
}

func (f *flood) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// stop ends the flood and waits for its goroutines; safe to call twice.
func (f *flood) stop() {
	f.once.Do(func() {
		f.cancel()
		f.wg.Wait()
	})
}
