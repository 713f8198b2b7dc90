package inspect

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/runs"
)

func TestMain(m *testing.M) {
	os.Exit(bustest.CheckLeaks(m.Run()))
}

// TestReadRuns: only unfinished runs older than StuckAfter are stuck, by
// the time they started (else were created); finished runs and values that
// are no run record are not; an absent bucket reads as empty and is not
// created.
func TestReadRuns(t *testing.T) {
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	names := bus.NewNames("")
	now := time.UnixMilli(1_800_000_000_000)
	o := Options{Names: names, StuckAfter: 10 * time.Minute, Now: func() time.Time { return now }}

	rep, err := Read(ctx, js, o)
	if err != nil || len(rep.StuckRuns)+len(rep.Streams)+len(rep.Buckets) != 0 {
		t.Fatalf("empty server: %+v %v", rep, err)
	}
	if _, err := js.KeyValue(ctx, names.RunsBucket()); err != jetstream.ErrBucketNotFound {
		t.Fatalf("Read created the runs bucket: %v", err)
	}

	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: names.RunsBucket()})
	if err != nil {
		t.Fatal(err)
	}
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	put := func(key string, v any) {
		b, _ := json.Marshal(v)
		if _, err := kv.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	put("old-pending", runs.Record{RunID: "old-pending", Status: runs.Pending, CreatedAt: ago(11 * time.Minute)})
	put("new-pending", runs.Record{RunID: "new-pending", Status: runs.Pending, CreatedAt: ago(9 * time.Minute)})
	// created long ago, started recently: not stuck
	put("restarted", runs.Record{RunID: "restarted", Status: runs.Running, CreatedAt: ago(time.Hour), StartedAt: ago(time.Minute)})
	put("old-running", runs.Record{RunID: "old-running", Status: runs.Running, Gateway: "gw1", Attempts: 2, CreatedAt: ago(2 * time.Hour), StartedAt: ago(time.Hour)})
	put("old-ok", runs.Record{RunID: "old-ok", Status: runs.OK, CreatedAt: ago(time.Hour)})
	put("wait.x", map[string]any{"waiting": true}) // not a run record

	rep, err = Read(ctx, js, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []Run{
		{RunID: "old-running", Status: runs.Running, Gateway: "gw1", Attempts: 2, CreatedAt: ago(2 * time.Hour), StartedAt: ago(time.Hour), AgeSeconds: 3600},
		{RunID: "old-pending", Status: runs.Pending, CreatedAt: ago(11 * time.Minute), AgeSeconds: 660},
	}
	if fmt.Sprint(rep.StuckRuns) != fmt.Sprint(want) {
		t.Fatalf("stuck runs\n got %+v\nwant %+v", rep.StuckRuns, want)
	}
	if len(rep.Buckets) != 1 || rep.Buckets[0].Name != names.RunsBucket() || rep.Buckets[0].Values != 6 {
		t.Fatalf("buckets %+v", rep.Buckets)
	}
	if len(rep.Streams) != 0 {
		t.Fatalf("a bucket's stream listed as a stream: %+v", rep.Streams)
	}
}
