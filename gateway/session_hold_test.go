package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
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
