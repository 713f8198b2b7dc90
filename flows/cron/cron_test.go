package cron

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/config/configtest"
	"github.com/sessionbus/sessionbus/flows/stores"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/kv/cronjobs"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/crontick"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

const testConfig = "agents:\n  list:\n    - id: main\n    - id: ops\n"

// worker is one process's cron service and its share of the ticks.
type worker struct {
	svc  *Service
	st   *stores.Stores
	cons jetstream.ConsumeContext
}

func newWorker(t *testing.T, s *embedded.Server, cfg *config.Config) *worker {
	t.Helper()
	nc, _ := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	st, err := stores.Open(ctx, nc, cfg.Bus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	names := bus.NewNames(cfg.Bus.Prefix)
	jobs, err := cronjobs.Open(ctx, st.JS, names)
	if err != nil {
		t.Fatal(err)
	}
	ticks, err := crontick.Open(ctx, st.JS, names)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{st: st, svc: &Service{
		Jobs: jobs, Ticks: ticks, Starter: &submit.Starter{Queue: st.Queue, Runs: st.Runs}, Runs: st.Runs,
		Store: st.Sessions, JS: st.JS, Names: names, Config: cfg, Signals: st.Signals,
	}}
	t.Cleanup(w.svc.Close)
	return w
}

func (w *worker) consume(t *testing.T) {
	t.Helper()
	c, err := w.svc.Ticks.Consume(context.Background(), w.svc.HandleTick, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	w.cons = c
	t.Cleanup(w.stop)
}

func (w *worker) stop() {
	if w.cons != nil {
		w.cons.Stop()
	}
}

func addJob(t *testing.T, svc *Service, job map[string]any) *cronjobs.Job {
	t.Helper()
	b, _ := json.Marshal(job)
	j, err := svc.Add(bustest.Context(t), b)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func every(name string, seconds int) map[string]any {
	return map[string]any{
		"name": name, "schedule": map[string]any{"kind": "every", "everyMs": seconds * 1000},
		"sessionTarget": "isolated", "payload": map[string]any{"kind": "agentTurn", "message": "tick"},
		"delivery": map[string]any{"mode": "none"},
	}
}

func history(t *testing.T, svc *Service, id string) []*cronjobs.Run {
	t.Helper()
	h, err := svc.Jobs.Runs(bustest.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOnceAcrossWorkers: a job ticking every second over two workers runs
// once per tick, one worker stopping halfway; every tick's run is its own
// (distinct ticks, distinct runs), and their number is the seconds that
// passed, give or take the edges.
func TestOnceAcrossWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("ticks for several seconds")
	}
	s := bustest.Server(t)
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	a, b := newWorker(t, s, cfg), newWorker(t, s, cfg)
	a.consume(t)
	b.consume(t)
	j := addJob(t, a.svc, every("pulse", 1))
	start := time.Now()
	bustest.WaitFor(t, 10*time.Second, "three runs", func() bool { return len(history(t, a.svc, j.ID)) >= 3 })
	b.stop() // one worker goes away; the other takes every tick
	n := len(history(t, a.svc, j.ID))
	bustest.WaitFor(t, 10*time.Second, "three more runs", func() bool { return len(history(t, a.svc, j.ID)) >= n+3 })
	elapsed := time.Since(start)
	if _, err := a.svc.SetEnabled(bustest.Context(t), j.ID, false); err != nil {
		t.Fatal(err)
	}
	h := history(t, a.svc, j.ID)
	ticks, ids := map[string]bool{}, map[string]bool{}
	for _, r := range h {
		if ticks[r.Tick] || ids[r.RunID] {
			t.Fatalf("tick %s ran twice: %+v", r.Tick, h)
		}
		ticks[r.Tick], ids[r.RunID] = true, true
		if _, _, err := a.svc.Runs.Get(bustest.Context(t), r.RunID); err != nil {
			t.Fatalf("run %s of tick %s has no record: %v", r.RunID, r.Tick, err)
		}
	}
	if secs := int(elapsed.Seconds()); len(h) < secs-2 || len(h) > secs+2 {
		t.Fatalf("%d runs in %s: want one a second", len(h), elapsed)
	}
}

// TestDuplicateTickStartsOnce: the same tick taken by two workers at once
// (a redelivery, or a second copy after a leader change) starts one run.
func TestDuplicateTickStartsOnce(t *testing.T) {
	s := bustest.Server(t)
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	a, b := newWorker(t, s, cfg), newWorker(t, s, cfg)
	job := every("dup", 3600)
	j := addJob(t, a.svc, job)
	tk := &crontick.Tick{JobID: j.ID, Key: "2026-12-06T05:00:00Z", Next: time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC), Stored: time.Now()}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		w := a
		if i%2 == 1 {
			w = b
		}
		wg.Go(func() { errs[i] = w.svc.HandleTick(context.Background(), tk) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	info, err := a.st.Queue.Stream().Info(bustest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d run requests queued for one tick, want 1", info.State.Msgs)
	}
	if h := history(t, a.svc, j.ID); len(h) != 1 {
		t.Fatalf("history %d entries, want 1", len(h))
	}
}

// TestDisableStopsWithinOneTick: after disable returns, at most the tick
// already in hand runs; none after.
func TestDisableStopsWithinOneTick(t *testing.T) {
	if testing.Short() {
		t.Skip("ticks for several seconds")
	}
	s := bustest.Server(t)
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	a := newWorker(t, s, cfg)
	a.consume(t)
	j := addJob(t, a.svc, every("stopper", 1))
	bustest.WaitFor(t, 10*time.Second, "two runs", func() bool { return len(history(t, a.svc, j.ID)) >= 2 })
	if _, err := a.svc.SetEnabled(bustest.Context(t), j.ID, false); err != nil {
		t.Fatal(err)
	}
	n := len(history(t, a.svc, j.ID))
	deadline := time.Now().Add(3 * time.Second)
	bustest.WaitFor(t, 5*time.Second, "three quiet seconds", func() bool { return time.Now().After(deadline) })
	if m := len(history(t, a.svc, j.ID)); m > n+1 {
		t.Fatalf("disabled job ran %d more times", m-n)
	}
	if ok, _ := a.svc.Ticks.Scheduled(bustest.Context(t), j.ID); ok {
		t.Fatal("a disabled job keeps its schedule")
	}
}

// TestAtRunsOnceAndDeletes: a one-shot runs once and, its run ended ok,
// deletes itself (deleteAfterRun, the default for at).
func TestAtRunsOnceAndDeletes(t *testing.T) {
	s := bustest.Server(t)
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	a := newWorker(t, s, cfg)
	a.consume(t)
	at := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second)
	j := addJob(t, a.svc, map[string]any{
		"name": "reminder", "schedule": map[string]any{"kind": "at", "at": at.Format(time.RFC3339)},
		"sessionTarget": "main", "payload": map[string]any{"kind": "systemEvent", "text": "check the docs draft"},
	})
	if !j.DeleteAfterRun {
		t.Fatal("an at job deletes after its run by default")
	}
	bustest.WaitFor(t, 10*time.Second, "the run", func() bool { return len(history(t, a.svc, j.ID)) == 1 })
	r := history(t, a.svc, j.ID)[0]
	if r.SessionKey != "agent:main:main" {
		t.Fatalf("system event ran in %s, want the main session", r.SessionKey)
	}
	if _, err := a.svc.Runs.Update(bustest.Context(t), r.RunID, func(rec *runs.Record) error {
		rec.Status = runs.OK
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 10*time.Second, "the job gone", func() bool {
		_, _, err := a.svc.Jobs.Get(bustest.Context(t), j.ID)
		return errors.Is(err, cronjobs.ErrNotFound)
	})
	ch, err := a.st.Signals.Since(bustest.Context(t), "agent:main:main", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Events) != 1 || ch.Events[0].Kind != "run_completed" || ch.Events[0].RunID != r.RunID || ch.Events[0].ActorID != "cron:"+j.ID {
		t.Fatalf("the signal log of the main session: %+v", ch.Events)
	}
}

// TestBadInputWritesNothing: each refusal names what was wrong, and
// neither a job nor a schedule is stored.
func TestBadInputWritesNothing(t *testing.T) {
	s := bustest.Server(t)
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig+"cron:\n  minInterval: 1m\n")
	a := newWorker(t, s, cfg)
	base := func(mut func(m map[string]any)) map[string]any {
		m := every("bad", 3600)
		mut(m)
		return m
	}
	for want, job := range map[string]map[string]any{
		"invalid cron expression": base(func(m map[string]any) { m["schedule"] = map[string]any{"kind": "cron", "expr": "0 25 * * *"} }),
		"invalid timezone": base(func(m map[string]any) {
			m["schedule"] = map[string]any{"kind": "cron", "expr": "0 7 * * *", "tz": "Mars/Base"}
		}),
		"below the minimum interval of 1m0s": base(func(m map[string]any) { m["schedule"] = map[string]any{"kind": "every", "everyMs": 5000} }),
		`unknown agent "ghost"`:              base(func(m map[string]any) { m["agentId"] = "ghost" }),
		`delivery channel "slack" has no adapter`: base(func(m map[string]any) {
			m["delivery"] = map[string]any{"mode": "announce", "channel": "slack", "to": "channel:C1"}
		}),
		`main cron jobs require payload.kind="systemEvent"`: base(func(m map[string]any) { m["sessionTarget"] = "main" }),
	} {
		b, _ := json.Marshal(job)
		_, err := a.svc.Add(bustest.Context(t), b)
		if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeBadRequest || !strings.Contains(e.Message, want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	jobs, err := a.svc.Jobs.List(bustest.Context(t))
	if err != nil || len(jobs) != 0 {
		t.Fatalf("stored %d jobs (%v) from bad input", len(jobs), err)
	}
	info, err := a.st.JS.Stream(bustest.Context(t), bus.NewNames("").CronStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 0 {
		t.Fatalf("%d schedule messages from bad input", n)
	}
}

// TestEditRefusedScheduleKeepsJob: when the server takes no schedule (its
// stream is gone), an edit changes nothing: the job reads as before.
func TestEditRefusedScheduleKeepsJob(t *testing.T) {
	s := bustest.Server(t)
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", testConfig)
	a := newWorker(t, s, cfg)
	j := addJob(t, a.svc, every("steady", 3600))
	ctx := bustest.Context(t)
	if err := a.st.JS.DeleteStream(ctx, bus.NewNames("").CronStream()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.Edit(ctx, j.ID, []byte(`{"schedule":{"kind":"every","everyMs":7200000},"name":"changed"}`)); err == nil {
		t.Fatal("an edit whose schedule the server did not take succeeded")
	}
	got, _, err := a.svc.Jobs.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Schedule.EveryMs != 3_600_000 || got.Name != "steady" {
		t.Fatalf("job after a refused edit: %+v", got)
	}
}
