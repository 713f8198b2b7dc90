package runs

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

// ctx is the context of one test's server calls.
var ctx = bustest.Context

func openRuns(t *testing.T) *Records {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	r, err := Open(ctx(t), js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func TestUpdateAsync(t *testing.T) {
	r := openRuns(t)
	set := func(status string) func(*Record) error {
		return func(rr *Record) error { rr.Status = status; return nil }
	}
	// revision 0 creates
	wait, err := r.UpdateAsync(ctx(t), "a1", &Record{RunID: "a1"}, 0, set(Running))
	if err != nil {
		t.Fatal(err)
	}
	rec, rev, err := wait()
	if err != nil || rec.Status != Running || rev == 0 {
		t.Fatalf("create: %+v rev %d %v", rec, rev, err)
	}
	// a write meanwhile makes the CAS fail: fn is applied again to what is stored
	if _, err := r.Update(ctx(t), "a1", func(rr *Record) error { rr.Error = "meanwhile"; return nil }); err != nil {
		t.Fatal(err)
	}
	wait, err = r.UpdateAsync(ctx(t), "a1", rec, rev, set(OK))
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err = wait()
	if err != nil || rec.Status != OK || rec.Error != "meanwhile" {
		t.Fatalf("after lost CAS: %+v %v", rec, err)
	}
	got, _, _ := r.Get(ctx(t), "a1")
	if got.Status != OK || got.Error != "meanwhile" {
		t.Fatalf("stored %+v", got)
	}
	// creating over an existing record falls back to an update, too
	wait, _ = r.UpdateAsync(ctx(t), "a1", &Record{RunID: "a1"}, 0, set(Error))
	if rec, _, err = wait(); err != nil || rec.Status != Error || rec.Error != "meanwhile" {
		t.Fatalf("create over existing: %+v %v", rec, err)
	}
}

// A waiter registered before the run exists gets its terminal record
// without any read; one on a finished run gets it from Records.Wait's read.
func TestWatchBeforeRecord(t *testing.T) {
	r := openRuns(t)
	w, err := r.Watch("w1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	done := make(chan *Record, 1)
	go func() {
		rec, err := w.Wait(ctx(t))
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		done <- rec
	}()
	if err := r.RecordPending(ctx(t), &Record{RunID: "w1", Status: Pending}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(ctx(t), "w1", func(rr *Record) error { rr.Status, rr.Reply = OK, "hi"; return nil }); err != nil {
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
	if err != nil || rec.Status != OK {
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

// Waiters of one run come and go while its terminal record is delivered:
// every waiter still registered when the record lands gets it, and the
// race detector sees no write to what delivery reads (a waiter's Stop
// used to edit the slice delivery was iterating).
func TestWaitersStopWhileDelivered(t *testing.T) {
	r := openRuns(t)
	const id, churn = "c1", 200
	stay, err := r.Watch(id)
	if err != nil {
		t.Fatal(err)
	}
	defer stay.Stop()
	if err := r.RecordPending(ctx(t), &Record{RunID: id, Status: Pending}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ws := make([]*Waiter, 0, 4)
			for range 4 {
				w, err := r.Watch(id)
				if err != nil {
					t.Error(err)
					return
				}
				ws = append(ws, w)
			}
			for _, w := range ws {
				w.Stop()
			}
		}
	}()
	defer func() { close(stop); <-churned }()
	for i := range churn {
		if _, err := r.Update(ctx(t), id, func(rr *Record) error {
			rr.RunID, rr.Status, rr.Reply = id, OK, "r"+strconv.Itoa(i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if rec, err := stay.Wait(ctx(t)); err != nil || rec.Status != OK {
		t.Fatalf("the waiter that stayed: %+v %v", rec, err)
	}
}
