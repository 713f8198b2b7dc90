package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config/configtest"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// slowTurns is a config whose agent main takes delayMs for every turn, so
// sends are still waiting when a process gets SIGTERM; the announce step
// after each run is answered at once.
func slowTurns(delayMs int) string {
	return fmt.Sprintf(`
tools:
  sessions:
    visibility: all
session:
  agentToAgent:
    maxPingPongTurns: 0
agents:
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: "^Agent-to-agent announce step"
            reply: "ANNOUNCE_SKIP"
          - match: ".*"
            delayMs: %d
            reply: "done {{message}}"
`, delayMs)
}

const shutdownSends = 20

// TestServeSIGTERMWhileSendsWait sends SIGTERM to a real serve process while
// 20 sessions_send calls wait on their runs: none answers error, each
// answers ok or accepted with its runId, and after serve restarts on the
// same data dir every run completes.
func TestServeSIGTERMWhileSendsWait(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	_, cfgPath := configtest.Load(t, dir, "sessionbus.yaml", slowTurns(4000)) // longer than the grace serve gets
	args := []string{"serve", "--data", data, "--listen", anyPort, "--config", cfgPath, "--log-level", "warn", "--shutdown-grace", "1s"}
	srv := start(t, args...)
	url, _ := srv.ready(t)

	op, err := bus.LoadOperator(filepath.Join(data, bus.CredsFile))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := op.Mint(bus.Caller{SessionKey: mainKey}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nc, js := bustest.ConnectURL(t, url, nats.UserCredentials(filepath.Join(data, bus.CredsFile)))
	names := bus.NewNames("")
	kv, err := js.KeyValue(t.Context(), names.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	// statuses reads the run records of the sends (the announce steps'
	// records have a dot in their key); an error counts as "not yet".
	statuses := func() map[string]string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out := map[string]string{}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return out
		}
		for k := range keys.Keys() {
			if strings.Contains(k, ".") {
				continue
			}
			e, err := kv.Get(ctx, k)
			if err != nil {
				continue
			}
			var r runs.Record
			if json.Unmarshal(e.Value(), &r) == nil {
				out[k] = r.Status
			}
		}
		return out
	}

	type answer struct {
		i   int
		res map[string]any
		err error
	}
	answers := make(chan answer, shutdownSends)
	for i := 0; i < shutdownSends; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			body := fmt.Sprintf(`{"sessionKey":"agent:main:sd%02d","message":"slow %d","timeoutSeconds":120}`, i, i)
			out, err := bus.Call(ctx, nc, names, tok, "sessions_send", []byte(body))
			a := answer{i: i, err: err}
			if err == nil {
				err = json.Unmarshal(out, &a.res)
				a.err = err
			}
			answers <- a
		}()
	}
	// every run is in its turn (the gateway recorded it running) and every
	// send is waiting on it
	bustest.WaitFor(t, 60*time.Second, "20 runs in their turn", func() bool {
		n := 0
		for _, st := range statuses() {
			if st == runs.Running {
				n++
			}
		}
		return n == shutdownSends
	})

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.done:
		srv.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("serve exit after SIGTERM: %v; stderr %s", err, srv.errText())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit within 60s of SIGTERM; stderr %s", srv.errText())
	}

	runIDs := map[string]string{} // runId -> status the send answered
	deadline := time.After(30 * time.Second)
	for range shutdownSends {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Errorf("send %d: %v", a.i, a.err)
				continue
			}
			status, _ := a.res["status"].(string)
			runID, _ := a.res["runId"].(string)
			if (status != "ok" && status != "accepted") || runID == "" {
				t.Errorf("send %d answered %v; want ok or accepted with its runId", a.i, a.res)
				continue
			}
			runIDs[runID] = status
		case <-deadline:
			t.Fatalf("only %d of %d sends answered within 30s of serve's exit", len(runIDs), shutdownSends)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	counts := map[string]int{}
	for _, st := range runIDs {
		counts[st]++
	}
	t.Logf("answers at shutdown: %v", counts)

	// The gateway handed the interrupted turns back to the queue; across
	// the server's restart they are delivered again after the consumer's
	// ack wait (30 s), then take their 4 s.
	// The restarted serve binds a port of its own (a port the first one
	// held could be taken once it exits): read the run records over a new
	// connection to it.
	again := start(t, args...)
	url, _ = again.ready(t)
	_, js = bustest.ConnectURL(t, url, nats.UserCredentials(filepath.Join(data, bus.CredsFile)))
	if kv, err = js.KeyValue(t.Context(), names.RunsBucket()); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 120*time.Second, "every run done after the restart", func() bool {
		st := statuses()
		for id := range runIDs {
			if st[id] != runs.OK {
				return false
			}
		}
		return true
	})
	if err := again.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-again.done:
		again.done <- err
		if err != nil {
			t.Fatalf("restarted serve exit after SIGTERM: %v; stderr %s", err, again.errText())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("restarted serve did not exit within 60s of SIGTERM")
	}
}

// TestWorkerAndGatewaySIGTERM: a worker process that gets SIGTERM while a
// send waits lets the send finish within its grace (the true answer, ok
// with the reply); a gateway process that gets SIGTERM mid-turn hands the
// turn back, another gateway runs it, and the waiting send gets its reply.
// Both exit 0.
func TestWorkerAndGatewaySIGTERM(t *testing.T) {
	s := bustest.Server(t)
	nc, js := bustest.Connect(t, s)
	dir := t.TempDir()
	cfg, cfgPath := configtest.Load(t, dir, "sessionbus.yaml", slowTurns(2000))
	op := bustest.Operator(t)
	creds := bustest.AdminCreds(t, s.Deployment(), op)
	tok, err := op.Mint(bus.Caller{SessionKey: mainKey}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	names := bus.NewNames("")
	common := []string{"--server", s.URL(), "--creds", creds, "--config", cfgPath, "--log-level", "warn"}
	worker := start(t, append([]string{"worker", "--shutdown-grace", "30s"}, common...)...)
	worker.waitLine(t, "ready ")
	gwA := start(t, append([]string{"gateway", "--id", "gw-a"}, common...)...)
	gwA.waitLine(t, "ready gw-a")

	type answer struct {
		res map[string]any
		err error
	}
	send := func(target string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var a answer
			a.err = bus.CallJSON(ctx, nc, names, tok, "sessions_send", map[string]any{"sessionKey": target, "message": "slow", "timeoutSeconds": 50}, &a.res)
			ch <- a
		}()
		return ch
	}
	// runOf is the one run of target, once a gateway recorded it running.
	runOf := func(target string) (rec runs.Record) {
		kv, err := js.KeyValue(t.Context(), names.RunsBucket())
		if err != nil {
			t.Fatal(err)
		}
		bustest.WaitFor(t, 30*time.Second, "the run of "+target+" in its turn", func() bool {
			keys, err := kv.ListKeys(t.Context())
			if err != nil {
				return false
			}
			for k := range keys.Keys() {
				e, err := kv.Get(t.Context(), k)
				if err != nil || json.Unmarshal(e.Value(), &rec) != nil {
					continue
				}
				if rec.SessionKey == target && rec.Status == runs.Running && !strings.Contains(k, ".") {
					return true
				}
			}
			return false
		})
		return rec
	}
	sigterm := func(p *proc, name string) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-p.done:
			p.done <- err
			if err != nil {
				t.Fatalf("%s exit after SIGTERM: %v; stderr %s", name, err, p.errText())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not exit within 60s of SIGTERM", name)
		}
	}
	wantOK := func(ch chan answer, what string) {
		t.Helper()
		select {
		case a := <-ch:
			if a.err != nil || a.res["status"] != "ok" || a.res["reply"] != "done slow" {
				t.Fatalf("%s: %v %v; want ok with the reply", what, a.res, a.err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: no answer", what)
		}
	}

	// the worker: the send in flight finishes within the grace
	waiting := send("agent:main:w1")
	runOf("agent:main:w1")
	sigterm(worker, "worker")
	wantOK(waiting, "the send waiting on the stopped worker")

	// the gateway: its turn goes to the other replica
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	w, err := handlers.StartWorker(ctx, nc, cfg, bus.NewVerifier(op.PublicKey()), nil)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	waiting = send("agent:main:g1")
	if rec := runOf("agent:main:g1"); rec.Gateway != "gw-a" {
		t.Fatalf("run taken by %q, want gw-a", rec.Gateway)
	}
	gwB := start(t, append([]string{"gateway", "--id", "gw-b"}, common...)...)
	gwB.waitLine(t, "ready gw-b")
	sigterm(gwA, "gateway gw-a")
	wantOK(waiting, "the send whose gateway stopped")
	sigterm(gwB, "gateway gw-b")
}
