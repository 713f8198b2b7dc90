package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// One of three workers restarts again and again while callers list: no
// call fails and every reply lists every session. A worker joins the
// tools' queue group only once its session index is loaded (a reply from
// a half-loaded index would list fewer), and leaves it by draining (a
// request it was handed is still answered).
func TestWorkerRestartKeepsCallersAnswered(t *testing.T) {
	const n = 150 // under sessions_list's largest page (200)
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "agent"
		// four callers as one session, as fast as the workers answer: the
		// per-session quota (20/s, burst 200 a worker) would refuse some on
		// a fast machine, and the test is about restarts, not quotas
		c.Quotas.ToolCallsPerSession.Rate, c.Quotas.ToolCallsPerAgent.Rate = 0, 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := time.Now().UnixMilli()
	for i := range n {
		e := sessions.Sample(i, now)
		e.SpawnedBy, e.SpawnDepth, e.Label = "", nil, "" // no lineage: every row is a plain session of agent main
		if _, err := s.Worker.Deps.Store.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	start := func() *handlers.Worker {
		nc, _ := bustest.Connect(t, s.Server)
		w, err := handlers.StartWorker(ctx, nc, s.Config, bus.NewVerifier(s.Operator.PublicKey()), nil)
		if err != nil {
			t.Fatalf("start worker: %v", err)
		}
		return w
	}
	second := start()
	defer second.Stop()
	third := start()
	defer func() { third.Stop() }()

	token := s.Token(bus.Caller{SessionKey: "agent:main:main"})
	var calls, failed atomic.Int64
	var firstFail atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		nc, _ := bustest.Connect(t, s.Server)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				out, err := bus.Call(cctx, nc, s.Worker.Deps.Names, token, "sessions_list", []byte(`{"limit":200}`))
				ccancel()
				var res struct {
					Count int `json:"count"`
				}
				if err == nil {
					if err = json.Unmarshal(out, &res); err == nil && res.Count != n {
						err = fmt.Errorf("caller %d: listed %d sessions, want %d", c, res.Count, n)
					}
				}
				calls.Add(1)
				if err != nil {
					failed.Add(1)
					firstFail.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	const restarts = 5
	for range restarts {
		before := calls.Load()
		bustest.WaitFor(t, 30*time.Second, "calls between restarts", func() bool { return calls.Load() >= before+20 })
		third.Shutdown(bus.DefaultShutdownGrace)
		third = start()
	}
	before := calls.Load()
	bustest.WaitFor(t, 30*time.Second, "calls after the last restart", func() bool { return calls.Load() >= before+20 })
	close(stop)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d calls failed over %d restarts, first: %v", f, calls.Load(), restarts, firstFail.Load())
	}
	t.Logf("%d calls over %d restarts, none failed", calls.Load(), restarts)
}
