package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// TestWorkerSIGKILL kills one of two worker processes while requests flow:
// the other keeps answering, and a request caught on the dead worker
// succeeds when retried.
func TestWorkerSIGKILL(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op := bustest.Operator(t)
	creds := bustest.AdminCreds(t, s.Deployment(), op)
	// eight callers loop as fast as they can on one token: load quotas
	cfg := loadQuotaFile(t)
	w1 := start(t, "worker", "--server", s.URL(), "--creds", creds, "--config", cfg)
	w1.waitLine(t, "ready ")
	w2 := start(t, "worker", "--server", s.URL(), "--creds", creds, "--config", cfg)
	w2.waitLine(t, "ready ")

	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Hour)
	names := bus.NewNames("")
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := bus.Call(ctx, nc, names, tok, "sessions_list", []byte(`{}`))
		return err
	}
	// every request must eventually be answered; only a timeout or a
	// no-responders race on the killed worker may need a retry
	var answered, retried atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for attempt := 0; ; attempt++ {
					err := call()
					if err == nil {
						answered.Add(1)
						break
					}
					if attempt > 5 || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || isUnavailable(err)) {
						t.Errorf("request failed for good: %v", err)
						return
					}
					retried.Add(1)
				}
			}
		}()
	}
	bustest.WaitFor(t, 60*time.Second, "200 answers", func() bool { return answered.Load() > 200 })
	if err := w1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-w1.done
	w1.done <- nil
	before := answered.Load()
	bustest.WaitFor(t, 60*time.Second, "500 more answers after the kill", func() bool { return answered.Load() > before+500 })
	close(stop)
	wg.Wait()
	// after the kill, a fresh request goes to the survivor at once
	for i := 0; i < 50; i++ {
		if err := call(); err != nil {
			t.Fatalf("request %d after the kill: %v", i, err)
		}
	}
	t.Logf("answered %d, retried %d", answered.Load(), retried.Load())
}

func isUnavailable(err error) bool {
	e, ok := bus.AsError(err)
	return ok && e.Code == bus.CodeUnavailable
}

// workerKillSendConfig: turns take a second, so sends are still waiting
// on their worker when it is killed.
const workerKillSendConfig = `
agents:
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: ".*"
            delayMs: 1000
            reply: "ok {{message}}"
`

// TestWorkerSIGKILLMidSend: 20 sessions_send calls wait on the only worker
// process when it is SIGKILLed; the callers get no answer. Each retries
// with the same idempotencyKey against a new worker and gets the reply of
// the one run its first call started: one run record per key, one attempt,
// the prompt and the reply once in the transcript.
func TestWorkerSIGKILLMidSend(t *testing.T) {
	const sends = 20
	dep := newDeployment(t, workerKillSendConfig)
	ctx := bustest.Context(t)
	names := bus.NewNames(dep.cfg.Bus.Prefix)
	store, err := sessions.Open(ctx, dep.js, names)
	if err != nil {
		t.Fatal(err)
	}
	targets := make([]string, 4)
	for i := range targets {
		targets[i] = fmt.Sprintf("agent:main:subagent:wk%d", i)
		now := time.Now().UnixMilli()
		if _, err := store.Create(ctx, &sessions.Entry{Key: targets[i], AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now, SpawnedBy: "agent:main:main"}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := gateway.StartWithOptions(ctx, dep.nc, dep.cfg, dep.op, "gw-wk", nil, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	w1 := start(t, "worker", "--server", dep.s.URL(), "--creds", dep.creds, "--config", dep.cfgPath, "--log-level", "warn")
	w1.waitLine(t, "ready ")

	tok, _ := dep.op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Hour)
	params := func(i int) []byte {
		b, _ := json.Marshal(map[string]any{"sessionKey": targets[i%len(targets)], "message": fmt.Sprintf("m-%02d", i), "timeoutSeconds": 30, "idempotencyKey": fmt.Sprintf("wk-%02d", i)})
		return b
	}
	firstErrs := make([]error, sends)
	var wg sync.WaitGroup
	for i := range sends {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, firstErrs[i] = bus.Call(cctx, dep.nc, names, tok, "sessions_send", params(i))
		})
	}
	// kill the worker once every send is queued (a pending or running
	// record per key), so all of them wait on it
	bustest.WaitFor(t, 30*time.Second, "every send queued", func() bool {
		keys, err := g.Runs().KV().Keys(ctx)
		return err == nil && len(keys) == sends
	})
	if err := w1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-w1.done
	w1.done <- nil
	wg.Wait()
	for i, err := range firstErrs {
		if err == nil {
			t.Fatalf("send %d was answered although its worker was killed while it waited", i)
		}
	}
	w2 := start(t, "worker", "--server", dep.s.URL(), "--creds", dep.creds, "--config", dep.cfgPath, "--log-level", "warn")
	w2.waitLine(t, "ready ")
	runIDs := make([]string, sends)
	for i := range sends {
		cctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		out, err := bus.Call(cctx, dep.nc, names, tok, "sessions_send", params(i))
		cancel()
		var res sendResult
		if err != nil || json.Unmarshal(out, &res) != nil || res.Status != "ok" || res.Reply != fmt.Sprintf("ok m-%02d", i) {
			t.Fatalf("retry of send %d: %s %v", i, out, err)
		}
		runIDs[i] = res.RunID
	}
	keys, err := g.Runs().KV().Keys(ctx)
	if err != nil || len(keys) != sends {
		t.Fatalf("%d run records for %d sends (%v)", len(keys), sends, err)
	}
	perTarget := map[string][]string{}
	for i, id := range runIDs {
		rec, _, err := g.Runs().Get(ctx, id)
		if err != nil || rec.Status != runs.OK || rec.Attempts != 1 {
			t.Errorf("send %d: run %+v %v", i, rec, err)
		}
		perTarget[targets[i%len(targets)]] = append(perTarget[targets[i%len(targets)]], id)
	}
	for _, target := range targets {
		checkRunParts(t, g.Transcripts(), target, perTarget[target])
	}
}
