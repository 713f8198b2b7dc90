package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestQuickSuiteJSON runs every benchmark in --quick mode (tiny data sets,
// a few dozen operations) and checks the JSON contract, not the figures.
func TestQuickSuiteJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	// a bound on a stuck run, not on speed: with -race on two shared cores
	// the whole quick suite has taken close to two minutes
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var log bytes.Buffer
	rep, err := Run(ctx, Options{Quick: true, Log: &log})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	var out bytes.Buffer
	if err := rep.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Go      string           `json:"go"`
		CPUs    int              `json:"cpus"`
		Results []map[string]any `json:"results"`
		Quotas  any              `json:"quotas"`
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not one JSON object: %v", err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value")
	}
	if !strings.HasPrefix(doc.Go, "go") || doc.CPUs < 1 {
		t.Fatalf("go %q cpus %d", doc.Go, doc.CPUs)
	}
	var names []string
	byName := map[string]map[string]any{}
	for _, r := range doc.Results {
		n, _ := r["name"].(string)
		names = append(names, n)
		byName[n] = r
	}
	if !slices.Equal(names, Names()) {
		t.Fatalf("results %v, want %v", names, Names())
	}
	for _, s := range registry {
		r := byName[s.name]
		for _, k := range []string{"ops", "p50_ns", "p99_ns", "ops_per_sec", "cpu_us_per_op"} {
			if v, ok := r[k].(float64); !ok || v <= 0 {
				t.Errorf("%s: %s = %v, want a positive number", s.name, k, r[k])
			}
		}
		if r["p99_ns"].(float64) < r["p50_ns"].(float64) {
			t.Errorf("%s: p99 < p50", s.name)
		}
		if sync, _ := r["sync"].(string); sync == "" {
			t.Errorf("%s: no sync setting", s.name)
		}
		base, _ := r["baseline"].(string)
		ratio, hasRatio := r["ratio"].(float64)
		switch {
		case s.isBase:
			if base != s.name || ratio != 1 {
				t.Errorf("baseline %s: baseline %q ratio %v, want itself and 1", s.name, base, r["ratio"])
			}
		case s.baseline == "":
			if base != "" || hasRatio {
				t.Errorf("%s: baseline %q ratio %v, want neither", s.name, base, r["ratio"])
			}
		default:
			b := byName[s.baseline]
			want := r["p50_ns"].(float64) / b["p50_ns"].(float64)
			if base != s.baseline || !hasRatio || ratio < want*0.99 || ratio > want*1.01 {
				t.Errorf("%s: baseline %q ratio %v, want %s and %.3f", s.name, base, r["ratio"], s.baseline, want)
			}
		}
	}
	for _, n := range []string{"list_10k", "list_100k"} {
		if v, ok := byName[n]["bytes_per_session"].(float64); !ok || v <= 0 {
			t.Errorf("%s: bytes_per_session = %v", n, byName[n]["bytes_per_session"])
		}
	}
	// The send-path floors make exactly the writes their shapes name
	// (bench/send_chain.go), so their figures are the cost of those writes.
	for n, want := range map[string]float64{"raw_send_chain": 8, "raw_send_chain_3wave": 7, "raw_send_chain_2wave": 6} {
		per, _ := byName[n]["writes_per_send"].(map[string]any)
		total := 0.0
		for _, w := range per {
			f, _ := w.(float64)
			total += f
		}
		if math.Abs(total-want) > 0.001 {
			t.Errorf("%s: %v writes per call (%v), want %v", n, total, per, want)
		}
	}
	// flood_p99: both phases measured, the flooding caller refused
	fl := byName["flood_p99"]
	for _, k := range []string{"quiet_p50_ns", "quiet_p99_ns", "flood_p99_ratio", "flood_calls_per_sec", "flood_refused_share"} {
		if v, ok := fl[k].(float64); !ok || v <= 0 {
			t.Errorf("flood_p99: %s = %v, want a positive number", k, fl[k])
		}
	}
	if q, _ := doc.Quotas.(string); !strings.Contains(q, "never reached") {
		t.Errorf("quotas = %v, want the bench's note on its quotas", doc.Quotas)
	}
	if v, ok := byName["sanitize_80k"]["mb_per_sec"].(float64); !ok || v <= 0 {
		t.Errorf("sanitize_80k: mb_per_sec = %v", byName["sanitize_80k"]["mb_per_sec"])
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, n := range Names() {
		if !strings.Contains(table.String(), n) {
			t.Errorf("table lacks %s", n)
		}
	}
}

// TestOnlyAddsBaselines: --only runs the named benchmarks plus the
// baselines they reference, and rejects unknown names before starting anything.
func TestOnlyAddsBaselines(t *testing.T) {
	specs, err := selectSpecs([]string{"history_tail_1m", " list_10k "})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, s.name)
	}
	want := []string{"raw_request_reply", "list_10k", "raw_direct_get_50", "history_tail_1m"}
	if !slices.Equal(got, want) {
		t.Fatalf("selected %v, want %v", got, want)
	}
	if _, err := Run(context.Background(), Options{Only: []string{"list_10m"}}); err == nil || !strings.Contains(err.Error(), `unknown benchmark "list_10m"`) {
		t.Fatalf("unknown name: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Only: []string{"list_10k"}, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Name != "raw_request_reply" || rep.Results[1].Name != "list_10k" {
		t.Fatalf("results %+v", rep.Results)
	}
}

// TestStreamDelta: the live-output benchmark runs alone with its baseline
// and measures deltas that reached the subscriber.
func TestStreamDelta(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Only: []string{"stream_delta"}, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[1].Name != "stream_delta" || rep.Results[1].P50 <= 0 || rep.Results[1].Ratio == nil {
		t.Fatalf("results %+v", rep.Results)
	}
}

// TestCompactionBench: the compaction benchmark runs alone with its
// baseline, compacts every session once and counts its writes: the one
// compaction entry among them.
func TestCompactionBench(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Only: []string{"compaction"}, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[1].Name != "compaction" || rep.Results[1].P50 <= 0 || rep.Results[1].Ratio == nil {
		t.Fatalf("results %+v", rep.Results)
	}
	if w := rep.Results[1].WritesPerSend["SB_TRANSCRIPTS"]; w != 1 {
		t.Fatalf("transcript writes per compaction %v, want 1 (the compaction entry): %s", w, rep.Results[1].Dataset)
	}
}
