package cron

import (
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config/configtest"
)

// TestMissedTicksRunOnce: ticks that fell due while no worker read them
// collapse into one run when a worker comes back (OpenClaw runs a missed
// job once), then the job ticks on once a second.
func TestMissedTicksRunOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("ticks for several seconds")
	}
	s := bustest.Server(t)
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	a := newWorker(t, s, cfg)
	a.consume(t)
	j := addJob(t, a.svc, every("catchup", 1))
	bustest.WaitFor(t, 10*time.Second, "two runs", func() bool { return len(history(t, a.svc, j.ID)) >= 2 })
	a.stop()
	n := len(history(t, a.svc, j.ID))
	down := time.Now()
	bustest.WaitFor(t, 10*time.Second, "four seconds without a worker", func() bool { return time.Since(down) >= 4*time.Second })
	if m := len(history(t, a.svc, j.ID)); m > n+1 {
		t.Fatalf("%d runs while no worker read the ticks", m-n)
	}
	n = len(history(t, a.svc, j.ID)) // a tick in hand when it stopped may have finished
	b := newWorker(t, s, cfg)
	b.consume(t)
	bustest.WaitFor(t, 10*time.Second, "the catch-up run", func() bool { return len(history(t, b.svc, j.ID)) >= n+1 })
	back := time.Now()
	bustest.WaitFor(t, 10*time.Second, "two seconds back", func() bool { return time.Since(back) >= 2*time.Second })
	// one catch-up for the four missed ticks, then one a second
	if got := len(history(t, b.svc, j.ID)) - n; got > 4 {
		t.Fatalf("%d runs in the 2 s after 4 s of missed ticks: the missed ones were not collapsed", got)
	}
}

// TestServerRestartKeepsSchedules: a schedule survives the server's
// restart on its store, and the job ticks on, no tick twice.
func TestServerRestartKeepsSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("ticks for several seconds")
	}
	dir := t.TempDir()
	d := bustest.Deployment(t)
	start := func() *embedded.Server {
		s, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:-1", Sync: embedded.LazySync, Auth: d})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	a := newWorker(t, s, cfg)
	a.consume(t)
	j := addJob(t, a.svc, every("survivor", 1))
	bustest.WaitFor(t, 10*time.Second, "two runs", func() bool { return len(history(t, a.svc, j.ID)) >= 2 })
	a.stop()
	a.svc.Close()
	a.st.Close()
	s.Shutdown()
	s = start()
	t.Cleanup(s.Shutdown)
	b := newWorker(t, s, cfg)
	b.consume(t)
	n := len(history(t, b.svc, j.ID))
	bustest.WaitFor(t, 15*time.Second, "three runs after the restart", func() bool { return len(history(t, b.svc, j.ID)) >= n+3 })
	seen := map[string]bool{}
	for _, r := range history(t, b.svc, j.ID) {
		if seen[r.Tick] {
			t.Fatalf("tick %s ran twice", r.Tick)
		}
		seen[r.Tick] = true
	}
}
