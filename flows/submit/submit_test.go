package submit

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

// ctx is the context of one test's server calls.
var ctx = bustest.Context

type fixture struct {
	*runqueue.Queue
	recs  *runs.Records
	js    jetstream.JetStream
	names bus.Names
}

func (f fixture) Submit(ctx context.Context, req *runqueue.Request, rec *runs.Record) error {
	return Run(ctx, f.Queue, f.recs, req, rec)
}

func openRuns(t *testing.T) fixture {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	names := bus.NewNames("")
	q, err := runqueue.Open(ctx(t), js, names)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := runs.Open(ctx(t), js, names)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(recs.Close)
	return fixture{q, recs, js, names}
}

func queued(t *testing.T, r fixture) uint64 {
	t.Helper()
	info, err := r.Stream().Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestSubmitRecordsAndQueues(t *testing.T) {
	r := openRuns(t)
	req := &runqueue.Request{RunID: "r1", SessionKey: "agent:main:main", AgentID: "main", ChainID: "r1"}
	if err := r.Submit(ctx(t), req, &runs.Record{RunID: "r1", Status: runs.Pending}); err != nil {
		t.Fatal(err)
	}
	rec, _, err := r.recs.Get(ctx(t), "r1")
	if err != nil || rec.Status != runs.Pending || !req.Recorded {
		t.Fatalf("record %+v %v, recorded %v", rec, err, req.Recorded)
	}
	// an idempotent repeat is recognised by its record and queues nothing
	idem := &runs.Record{RunID: "r1", Status: runs.Pending, IdempotencyKey: "k"}
	if err := r.Submit(ctx(t), req, idem); !errors.Is(err, runs.ErrExists) {
		t.Fatalf("repeat: %v, want runs.ErrExists", err)
	}
	if n := queued(t, r); n != 1 {
		t.Fatalf("%d queued, want 1", n)
	}
	// RecordPending never overwrites
	if err := r.recs.RecordPending(ctx(t), &runs.Record{RunID: "r1", Status: runs.Pending, Error: "x"}); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := r.recs.Get(ctx(t), "r1"); rec.Error != "" {
		t.Fatalf("RecordPending overwrote: %+v", rec)
	}
}

// A run whose request could not be queued is marked error with the reason,
// never left pending, whichever submit path wrote its record.
func TestSubmitFailureIsRecorded(t *testing.T) {
	r := openRuns(t)
	if err := r.js.DeleteStream(ctx(t), r.names.RunsStream()); err != nil { // nothing stores sb.runs.> now
		t.Fatal(err)
	}
	for _, rec := range []*runs.Record{
		{RunID: "fresh", Status: runs.Pending},
		{RunID: "idem", Status: runs.Pending, IdempotencyKey: "k"},
	} {
		req := &runqueue.Request{RunID: rec.RunID, SessionKey: "agent:main:main", AgentID: "main", ChainID: rec.RunID}
		if err := r.Submit(ctx(t), req, rec); err == nil {
			t.Fatalf("%s: submit to a deleted stream succeeded", rec.RunID)
		}
		got, _, err := r.recs.Get(ctx(t), rec.RunID)
		if err != nil || got.Status != runs.Error || !strings.Contains(got.Error, "never queued") {
			t.Fatalf("%s: record %+v %v, want error saying it was never queued", rec.RunID, got, err)
		}
	}
}

// Retried leaves the record of a run it could not queue pending: its
// caller publishes the same request again (the first publish may have
// landed, and a record marked never queued would keep it from running).
func TestRetriedLeavesRecordPending(t *testing.T) {
	r := openRuns(t)
	if err := r.js.DeleteStream(ctx(t), r.names.RunsStream()); err != nil {
		t.Fatal(err)
	}
	req := &runqueue.Request{RunID: "carrier", SessionKey: "agent:main:main", AgentID: "main", ChainID: "carrier"}
	rec := &runs.Record{RunID: "carrier", Status: runs.Pending, IdempotencyKey: "k"}
	if err := Retried(ctx(t), r.Queue, r.recs, req, rec); err == nil {
		t.Fatal("submit to a deleted stream succeeded")
	}
	got, _, err := r.recs.Get(ctx(t), "carrier")
	if err != nil || got.Status != runs.Pending {
		t.Fatalf("record %+v %v, want pending", got, err)
	}
}

// A publish cut short by its caller's deadline may have landed: Run
// settles it with one more publish under the same message id instead of
// marking a run never queued that a gateway would then never run.
func TestRunSettlesAPublishCutShort(t *testing.T) {
	r := openRuns(t)
	done, cancel := context.WithCancel(ctx(t))
	cancel() // the caller's time is up before the publish
	req := &runqueue.Request{RunID: "late", SessionKey: "agent:main:main", AgentID: "main", ChainID: "late"}
	if err := Run(done, r.Queue, r.recs, req, &runs.Record{RunID: "late", Status: runs.Pending}); err != nil {
		t.Fatalf("run with its caller's time out: %v", err)
	}
	if n := queued(t, r); n != 1 {
		t.Fatalf("%d queued, want 1", n)
	}
	if got, _, err := r.recs.Get(ctx(t), "late"); err != nil || got.Status != runs.Pending {
		t.Fatalf("record %+v %v, want pending", got, err)
	}
}
