// Package runstest holds what tests in several packages share about run
// records: waiting for a run to end and catching one the moment it is
// recorded running. Production code never imports it.
package runstest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv/runs"
)

// WaitRun waits up to within for run runID to end and returns its terminal
// record; it fails the test with the last record seen when the run has not
// ended by then.
func WaitRun(t testing.TB, recs *runs.Records, runID string, within time.Duration) *runs.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	rec, err := recs.Wait(ctx, runID)
	if err != nil {
		t.Fatalf("wait %s: %v (last %+v)", runID, err, rec)
	}
	return rec
}

// RunUpdate decodes e, an update from a watch on a runs bucket, as a run
// record. ok is false for the nil entry that ends a watch's initial values,
// for a delete or purge, and for a value that is not a run record.
func RunUpdate(e jetstream.KeyValueEntry) (rec runs.Record, ok bool) {
	if e == nil || e.Operation() != jetstream.KeyValuePut {
		return rec, false
	}
	return rec, json.Unmarshal(e.Value(), &rec) == nil
}

// CatchRunning reads w, a watch on a runs bucket, until a run record is put
// with status running and match(key, record) holds, and returns that
// record. It fails the test with fail when ctx ends first.
//
// The caller opens the watch before it starts the work it watches, so no
// update is missed, and stops it after acting on the run it caught (a kill
// or a cut connection is meant to land while that run is in its turn).
func CatchRunning(t testing.TB, ctx context.Context, w jetstream.KeyWatcher, fail string, match func(key string, rec *runs.Record) bool) runs.Record {
	t.Helper()
	for {
		select {
		case e := <-w.Updates():
			if rec, ok := RunUpdate(e); ok && rec.Status == runs.Running && match(e.Key(), &rec) {
				return rec
			}
		case <-ctx.Done():
			t.Fatal(fail)
		}
	}
}
