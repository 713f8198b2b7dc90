package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// TestWaitingRunsStartInQueueOrder: a run that has waited long for its
// busy session (its retries 500 ms apart by then) and a run queued just
// before the session frees (retrying every few ms) start in the order
// they were queued, in two sessions at once. Before the waiting line the
// newer run took the session first nearly every time.
func TestWaitingRunsStartInQueueOrder(t *testing.T) {
	e := newEnv(t)
	var busy atomic.Int64
	e.gateway("gw1", Options{Observer: busyCounter{busy: &busy}})
	e.gateway("gw2", Options{Observer: busyCounter{busy: &busy}})
	ctx := context.Background()
	sessions := []string{"agent:main:line-a", "agent:main:line-b"}
	holders := map[string]string{}
	for _, s := range sessions {
		// a first turn creates the session's entry, where the line is kept
		first := e.request(s, "main", "hello")
		e.submit(first)
		e.wait(first.RunID)
		// then a run whose gateway is gone holds it, until the test ends it
		id := fmt.Sprintf("holder-%d", time.Now().UnixNano())
		at := uint64(2)
		rec := &runs.Record{RunID: id, SessionKey: s, AgentID: "main", Status: runs.Running,
			Gateway: "elsewhere", Attempts: 1, CreatedAt: time.Now().UnixMilli(), StartedAt: time.Now().UnixMilli(),
			TurnDeadline: time.Now().Add(time.Hour).UnixMilli(), TranscriptAt: &at}
		if err := e.runs.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		prompt, _ := json.Marshal(map[string]any{"role": "user", "content": "holding", runMarker: marker{Run: id, Part: "prompt"}})
		if _, err := e.tr.Append(ctx, bus.EncodeKey(s), prompt); err != nil {
			t.Fatal(err)
		}
		holders[s] = id
	}
	older := map[string]*runqueue.Request{}
	for _, s := range sessions {
		older[s] = e.request(s, "main", "older")
		e.submit(older[s])
	}
	// seven retries each: the older runs now wait 500 ms between tries
	bustest.WaitFor(t, 30*time.Second, "the older runs to back off to their longest delay", func() bool { return busy.Load() >= 14 })
	before := busy.Load()
	newer := map[string]*runqueue.Request{}
	for _, s := range sessions {
		newer[s] = e.request(s, "main", "newer")
		e.submit(newer[s])
	}
	bustest.WaitFor(t, 30*time.Second, "the newer runs to find their sessions busy", func() bool { return busy.Load() >= before+2 })
	for _, s := range sessions {
		if _, err := e.runs.Update(ctx, holders[s], func(r *runs.Record) error { r.Status = runs.Killed; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sessions {
		o, n := e.wait(older[s].RunID), e.wait(newer[s].RunID)
		if o.Status != runs.OK || n.Status != runs.OK {
			t.Fatalf("%s: records %+v %+v", s, o, n)
		}
		if o.StartedAt > n.StartedAt {
			t.Fatalf("%s: the run queued later started first (%d before %d)", s, n.StartedAt, o.StartedAt)
		}
		var got []string
		for _, m := range e.transcript(s) {
			got = append(got, fmt.Sprint(m["content"]))
		}
		if fmt.Sprint(got) != "[hello hello holding older older newer newer]" {
			t.Fatalf("%s: transcript %q", s, got)
		}
	}
}
