package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestLoadExactCalls: a load of a fixed number of calls per client (one
// round of the mix each) makes exactly those calls, every tool of the mix
// in its share, without an error, and the table names every tool.
func TestLoadExactCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log bytes.Buffer
	const clients = 3
	rep, err := RunLoad(ctx, LoadOptions{Duration: 2 * time.Minute, Clients: clients, Calls: len(loadMix), Log: &log})
	if err != nil {
		t.Fatalf("load: %v\n%s", err, log.String())
	}
	if rep.Errors != 0 || rep.Ops != clients*len(loadMix) {
		t.Fatalf("%d calls, %d errors (%v), want %d calls, none failed\n%s", rep.Ops, rep.Errors, rep.FirstErrors, clients*len(loadMix), log.String())
	}
	share := map[string]int{}
	for _, tool := range loadMix {
		share[tool] += clients
	}
	if len(rep.Tools) != len(share) {
		t.Fatalf("tools %+v, want %v", rep.Tools, share)
	}
	for _, lt := range rep.Tools {
		if lt.Ops != share[lt.Tool] || lt.P50 <= 0 || lt.P99 < lt.P50 {
			t.Errorf("%s: %+v, want %d calls", lt.Tool, lt, share[lt.Tool])
		}
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for tool := range share {
		if !strings.Contains(out.String(), tool) {
			t.Errorf("table lacks %s:\n%s", tool, out.String())
		}
	}
}
