package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRawSendConcurrentShapes: each raw_send_concurrent row makes exactly
// the writes its shape names, on the streams it names, every call answered
// (so its ops/s is the cost of those writes), and the publish rows measure.
func TestRawSendConcurrentShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	only := []string{"raw_fsync_1file", "raw_fsync_6files", "raw_js_publish_concurrent", "raw_js_publish_concurrent_1s"}
	for n := range ccShapes {
		only = append(only, n)
	}
	rep, err := Run(ctx, Options{Only: only, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	stream := map[ccOp]string{
		ccLane: "KV_bench_cc_lanes", ccRunning: "KV_bench_cc_runs", ccOutcome: "KV_bench_cc_runs",
		ccPrompt: "BENCH_CC_TR", ccReply: "BENCH_CC_TR", ccIndex: "KV_bench_cc_index",
		ccTouch: "KV_bench_cc_sessions", ccReplyApart: "BENCH_CC_TR2", ccOutcomeApart: "KV_bench_cc_outcomes",
	}
	if len(rep.Results) != len(only)+1 { // and raw_js_publish
		t.Fatalf("%d results, want %d", len(rep.Results), len(only)+1)
	}
	seen := 0
	for _, r := range rep.Results {
		if r.Ops <= 0 || r.OpsPerSec <= 0 {
			t.Errorf("%s: ops %d ops/s %v", r.Name, r.Ops, r.OpsPerSec)
		}
		shape, ok := ccShapes[r.Name]
		if !ok {
			continue
		}
		seen++
		want := map[string]float64{"BENCH_CC_RUNS": 1}
		for _, w := range shape {
			for _, op := range w {
				if op != ccReads { // no write
					want[stream[op]]++
				}
			}
		}
		for s, n := range want {
			if math.Abs(r.WritesPerSend[s]-n) > 0.001 {
				t.Errorf("%s: %s %v writes per call, want %v (%s)", r.Name, s, r.WritesPerSend[s], n, r.Dataset)
			}
		}
		if len(r.WritesPerSend) != len(want) {
			t.Errorf("%s: writes on %v, want only %v", r.Name, r.WritesPerSend, want)
		}
		if !strings.Contains(r.Dataset, "per call") {
			t.Errorf("%s: dataset %q does not say its writes", r.Name, r.Dataset)
		}
	}
	if seen != len(ccShapes) {
		t.Fatalf("%d shape rows, want %d", seen, len(ccShapes))
	}
}
