package search

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// TestScaleMillionEntries: 10,000 sessions with a million entries, a
// phrase written once among them found exactly once, and every entry
// indexed once. SEARCH_SCALE_ENTRIES scales it down for a quicker look.
func TestScaleMillionEntries(t *testing.T) {
	// a million SQLite inserts under the race detector take far longer than
	// the whole suite: CI runs it on its own, without -race (.ci/run)
	if os.Getenv("SESSIONBUS_SEARCH_1M") == "" {
		t.Skip("long: a million entries; set SESSIONBUS_SEARCH_1M=1 to run it (CI does, without -race)")
	}
	sessionsN, total := 10_000, 1_000_000
	if v, err := strconv.Atoi(os.Getenv("SEARCH_SCALE_ENTRIES")); err == nil && v >= sessionsN {
		total = v
	}
	per := total / sessionsN
	r := newRig(t)
	// the test's own bound: bustest.Context's minute is less than a load
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	const needle = "the obsidian lighthouse keeps its ledger"
	planted := fmt.Sprintf("agent:main:k%d", sessionsN/3)
	t0 := time.Now()
	n, err := r.tr.BulkLoad(ctx, func(yield func(string, []byte) bool) {
		for i := range per {
			for s := range sessionsN {
				text := fmt.Sprintf("entry u%dx%d about the export job and its retries", s, i)
				if i == per/2 && fmt.Sprintf("agent:main:k%d", s) == planted {
					text = needle
				}
				if !yield(bus.EncodeKey(fmt.Sprintf("agent:main:k%d", s)), messages(text)[0]) {
					return
				}
			}
		}
	})
	if err != nil || n != uint64(per*sessionsN) {
		t.Fatalf("loaded %d (%v), want %d", n, err, per*sessionsN)
	}
	loaded := time.Since(t0)
	t1 := time.Now()
	in := r.start(Options{})
	defer in.Close()
	bustest.WaitFor(t, 30*time.Minute, "the index built", func() bool {
		st := in.Status()
		return st.State == StateReady && st.Lag == 0
	})
	built := time.Since(t1)
	count, err := in.Index().Count(ctx)
	if err != nil || count != int64(per*sessionsN) {
		t.Fatalf("%d entries indexed (%v), want %d", count, err, per*sessionsN)
	}
	hits := r.find(in, needle)
	if len(hits) != 1 || hits[0].SessionKey != planted || hits[0].Entry != uint64(per/2+1) {
		t.Fatalf("the phrase written once: %+v", hits)
	}
	for _, probe := range []string{"u0x0", fmt.Sprintf("u%dx%d", sessionsN-1, per-1), fmt.Sprintf("u%dx%d", sessionsN/2, per/3)} {
		if got := r.find(in, probe); len(got) != 1 {
			t.Fatalf("%s: %d hits, want 1", probe, len(got))
		}
	}
	q, _ := Parse([]byte(`{"query":"export job"}`))
	t2 := time.Now()
	res, err := in.Search(ctx, q)
	if err != nil || len(res.Results) != MaxResults || !res.More {
		t.Fatalf("a common phrase: %d hits, more %v, %v", len(res.Results), res.More, err)
	}
	t.Logf("%d sessions, %d entries: loaded in %v, indexed in %v (%.0f entries/s), %.1f B/entry, a common phrase's top 25 in %v",
		sessionsN, count, loaded.Round(time.Millisecond), built.Round(time.Millisecond), float64(count)/built.Seconds(),
		float64(in.Index().Bytes())/float64(count), time.Since(t2).Round(time.Microsecond))
}
