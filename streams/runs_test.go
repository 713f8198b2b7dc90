package streams

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func openRuns(t *testing.T) (*Runs, jetstream.JetStream) {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	r, err := OpenRuns(ctx(t), js, bus.NewNames(""), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, js
}

func queued(t *testing.T, r *Runs) uint64 {
	t.Helper()
	info, err := r.Stream().Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestSubmitRecordsAndQueues(t *testing.T) {
	r, _ := openRuns(t)
	req := &RunRequest{RunID: "r1", SessionKey: "agent:main:main", AgentID: "main", ChainID: "r1"}
	if err := r.Submit(ctx(t), req, &RunRecord{RunID: "r1", Status: RunPending}); err != nil {
		t.Fatal(err)
	}
	rec, _, err := r.Get(ctx(t), "r1")
	if err != nil || rec.Status != RunPending || !req.Recorded {
		t.Fatalf("record %+v %v, recorded %v", rec, err, req.Recorded)
	}
	// an idempotent repeat is recognised by its record and queues nothing
	idem := &RunRecord{RunID: "r1", Status: RunPending, IdempotencyKey: "k"}
	if err := r.Submit(ctx(t), req, idem); !errors.Is(err, ErrRunExists) {
		t.Fatalf("repeat: %v, want ErrRunExists", err)
	}
	if n := queued(t, r); n != 1 {
		t.Fatalf("%d queued, want 1", n)
	}
	// RecordPending never overwrites
	if err := r.RecordPending(ctx(t), &RunRecord{RunID: "r1", Status: RunPending, Error: "x"}); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := r.Get(ctx(t), "r1"); rec.Error != "" {
		t.Fatalf("RecordPending overwrote: %+v", rec)
	}
}

func TestUpdateAsync(t *testing.T) {
	r, _ := openRuns(t)
	set := func(status string) func(*RunRecord) error {
		return func(rr *RunRecord) error { rr.Status = status; return nil }
	}
	// revision 0 creates
	wait, err := r.UpdateAsync(ctx(t), "a1", &RunRecord{RunID: "a1"}, 0, set(RunRunning))
	if err != nil {
		t.Fatal(err)
	}
	rec, rev, err := wait()
	if err != nil || rec.Status != RunRunning || rev == 0 {
		t.Fatalf("create: %+v rev %d %v", rec, rev, err)
	}
	// a write meanwhile makes the CAS fail: fn is applied again to what is stored
	if _, err := r.Update(ctx(t), "a1", func(rr *RunRecord) error { rr.Error = "meanwhile"; return nil }); err != nil {
		t.Fatal(err)
	}
	wait, err = r.UpdateAsync(ctx(t), "a1", rec, rev, set(RunOK))
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err = wait()
	if err != nil || rec.Status != RunOK || rec.Error != "meanwhile" {
		t.Fatalf("after lost CAS: %+v %v", rec, err)
	}
	got, _, _ := r.Get(ctx(t), "a1")
	if got.Status != RunOK || got.Error != "meanwhile" {
		t.Fatalf("stored %+v", got)
	}
	// creating over an existing record falls back to an update, too
	wait, _ = r.UpdateAsync(ctx(t), "a1", &RunRecord{RunID: "a1"}, 0, set(RunError))
	if rec, _, err = wait(); err != nil || rec.Status != RunError || rec.Error != "meanwhile" {
		t.Fatalf("create over existing: %+v %v", rec, err)
	}
}

// A waiter registered before the run exists gets its terminal record
// without any read; one on a finished run gets it from Runs.Wait's read.
func TestWatchBeforeRecord(t *testing.T) {
	r, _ := openRuns(t)
	w, err := r.Watch("w1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	done := make(chan *RunRecord, 1)
	go func() {
		rec, err := w.Wait(ctx(t))
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		done <- rec
	}()
	if err := r.RecordPending(ctx(t), &RunRecord{RunID: "w1", Status: RunPending}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(ctx(t), "w1", func(rr *RunRecord) error { rr.Status, rr.Reply = RunOK, "hi"; return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-done:
		if rec == nil || rec.Reply != "hi" {
			t.Fatalf("got %+v", rec)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waiter never woke")
	}
	rec, err := r.Wait(ctx(t), "w1")
	if err != nil || rec.Status != RunOK {
		t.Fatalf("wait on finished run: %+v %v", rec, err)
	}
	// a run nobody records: the waiter times out with ctx's error
	w2, _ := r.Watch("w2")
	defer w2.Stop()
	c, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	if rec, err := w2.Wait(c); !errors.Is(err, context.DeadlineExceeded) || rec != nil {
		t.Fatalf("unrecorded run: %+v %v", rec, err)
	}
}

// Acked runs are purged below the shared consumer's ack floor; a run acked
// out of order above an unacked one stays until the floor passes it, and
// unacked runs are never purged.
func TestTrimBelowAckFloor(t *testing.T) {
	r, _ := openRuns(t)
	for i := range 4 {
		id := "t" + string(rune('0'+i))
		if err := r.Publish(ctx(t), &RunRequest{RunID: id, SessionKey: "agent:main:main", AgentID: "main", ChainID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.Unfinished(ctx(t)); err != nil || n != 4 {
		t.Fatalf("unfinished before any consumer: %d %v", n, err)
	}
	cons, err := r.Stream().CreateOrUpdateConsumer(ctx(t), jetstream.ConsumerConfig{Durable: GatewaysConsumer, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(4, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 4 {
		t.Fatalf("fetched %d", len(msgs))
	}
	for _, i := range []int{0, 1, 3} { // run 2 is still running
		if err := msgs[i].DoubleAck(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.Unfinished(ctx(t)); err != nil || n != 1 {
		t.Fatalf("unfinished: %d %v", n, err)
	}
	if n, err := r.Trim(ctx(t)); err != nil || n != 2 {
		t.Fatalf("trim purged %d %v, want 2", n, err)
	}
	if n := queued(t, r); n != 2 {
		t.Fatalf("%d left, want 2 (the running one and the one acked after it)", n)
	}
	if err := msgs[2].DoubleAck(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Trim(ctx(t)); err != nil || n != 2 {
		t.Fatalf("second trim purged %d %v, want 2", n, err)
	}
	if n, err := r.Trim(ctx(t)); err != nil || n != 0 {
		t.Fatalf("idle trim purged %d %v", n, err)
	}
}
