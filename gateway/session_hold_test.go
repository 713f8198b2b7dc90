package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// busyCounter counts the runs a gateway found their session busy for.
type busyCounter struct {
	nopObserver
	busy *atomic.Int64
}

func (b busyCounter) RunDone(outcome string) {
	if outcome == "busy" {
		b.busy.Add(1)
	}
}

// Runs of one session delivered to two gateways at once, round after
// round: with no lane, the transcript's compare-and-set and the check of
// its newest entry keep one run at a time in the session. The transcript is
// prompt/reply pairs of one run each, never interleaved, every run ran
// exactly once, and a run that lost the race waited as pending.
func TestOneRunAtATimeAcrossGateways(t *testing.T) {
	e := newEnv(t)
	var busy atomic.Int64
	e.gateway("gw1", Options{Concurrency: 8, Observer: busyCounter{busy: &busy}})
	e.gateway("gw2", Options{Concurrency: 8, Observer: busyCounter{busy: &busy}})
	const session = "agent:main:contended"
	const rounds, perRound = 30, 6
	var all []*runqueue.Request
	for round := range rounds {
		var reqs []*runqueue.Request
		for i := range perRound {
			reqs = append(reqs, e.request(session, "main", fmt.Sprintf("r%d-%d", round, i)))
		}
		var wg sync.WaitGroup
		for _, r := range reqs {
			wg.Go(func() { e.submit(r) })
		}
		wg.Wait()
		for _, r := range reqs {
			if rec := e.wait(r.RunID); rec.Status != runs.OK || rec.Attempts != 1 || rec.Reply != r.Prompt {
				t.Fatalf("round %d: record %+v", round, rec)
			}
		}
		all = append(all, reqs...)
	}
	entries, err := e.tr.Read(context.Background(), bus.EncodeKey(session), 0, uint64(2*len(all)+1))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2*len(all) {
		t.Fatalf("transcript has %d entries, want %d", len(entries), 2*len(all))
	}
	seen := map[string]bool{}
	for i := 0; i < len(entries); i += 2 {
		p, r := entryMarker(t, entries[i].Data), entryMarker(t, entries[i+1].Data)
		if p.Part != "prompt" || r.Part != "reply" || p.Run != r.Run || seen[p.Run] {
			t.Fatalf("entries %d and %d are %+v and %+v, want one run's prompt then its reply", i, i+1, p, r)
		}
		seen[p.Run] = true
	}
	t.Logf("%d runs; deliveries that found the session busy: %d", len(all), busy.Load())
}

func entryMarker(t *testing.T, data []byte) marker {
	t.Helper()
	var m struct {
		M *marker `json:"__sessionbus"`
	}
	if err := json.Unmarshal(data, &m); err != nil || m.M == nil {
		t.Fatalf("entry without a run marker: %s", data)
	}
	return *m.M
}

// A run whose prompt is the transcript's newest entry holds the session
// while its record is running: another run waits (busy) until the record
// is terminal. A running record long past its turn's deadline is an
// attempt whose gateway died and whose request is gone: it holds nothing.
func TestOpenPromptHoldsSessionUntilEndedOrPastDeadline(t *testing.T) {
	e := newEnv(t)
	var busy atomic.Int64
	e.gateway("gw1", Options{AckWait: time.Second, Observer: busyCounter{busy: &busy}})
	ctx := context.Background()
	orphan := func(session string, deadline time.Time) string {
		t.Helper()
		id := fmt.Sprintf("orphan-%d", time.Now().UnixNano())
		rec := &runs.Record{RunID: id, SessionKey: session, AgentID: "main", Status: runs.Running,
			Gateway: "dead", Attempts: 1, CreatedAt: time.Now().UnixMilli(), StartedAt: time.Now().UnixMilli(),
			TurnDeadline: deadline.UnixMilli(), TranscriptAt: new(uint64)}
		if err := e.runs.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		prompt, _ := json.Marshal(map[string]any{"role": "user", "content": "orphaned", runMarker: marker{Run: id, Part: "prompt"}})
		if _, err := e.tr.Append(ctx, bus.EncodeKey(session), prompt); err != nil {
			t.Fatal(err)
		}
		return id
	}
	contents := func(session string) string {
		var got []string
		for _, m := range e.transcript(session) {
			got = append(got, fmt.Sprint(m["content"]))
		}
		return strings.Join(got, "|")
	}

	held := "agent:main:held"
	id := orphan(held, time.Now().Add(time.Hour))
	req := e.request(held, "main", "after it")
	e.submit(req)
	bustest.WaitFor(t, 20*time.Second, "the run to find the session busy", func() bool { return busy.Load() > 0 })
	if rec, _, err := e.runs.Get(ctx, req.RunID); err != nil || rec.Status != runs.Pending || rec.TranscriptAt != nil {
		t.Fatalf("waiting run's record %+v %v, want pending with no transcript position", rec, err)
	}
	if _, err := e.runs.Update(ctx, id, func(r *runs.Record) error { r.Status = runs.Killed; return nil }); err != nil {
		t.Fatal(err)
	}
	if rec := e.wait(req.RunID); rec.Status != runs.OK || rec.Attempts != 1 {
		t.Fatalf("record %+v", rec)
	}
	if got := contents(held); got != "orphaned|after it|after it" {
		t.Fatalf("transcript %q", got)
	}

	stale := "agent:main:stale"
	orphan(stale, time.Now().Add(-time.Minute))
	req = e.request(stale, "main", "takes it")
	e.submit(req)
	if rec := e.wait(req.RunID); rec.Status != runs.OK {
		t.Fatalf("record %+v", rec)
	}
	if got := contents(stale); got != "orphaned|takes it|takes it" {
		t.Fatalf("transcript %q", got)
	}
}
