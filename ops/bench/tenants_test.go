package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// A tenants run on two tenants: every tenant's streams are counted, each
// is a Raft group on every node (R3 on three), each tenant one connection,
// and the table prints the per-tenant line.
func TestTenantsCost(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := RunTenants(ctx, TenantsOptions{Counts: []int{2}, Idle: time.Second, Settle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 {
		t.Fatalf("rows %+v, want one", rep.Rows)
	}
	r := rep.Rows[0]
	if r.Tenants != 2 || r.StreamsPerTenant < 10 || r.Streams != 2*int(r.StreamsPerTenant) || r.Buckets == 0 {
		t.Errorf("streams: %+v", r)
	}
	if r.RaftPerTenantServer < r.StreamsPerTenant {
		t.Errorf("%.1f Raft groups per tenant per node for %.1f R3 streams: each stream is one", r.RaftPerTenantServer, r.StreamsPerTenant)
	}
	if r.ConnsPerTenant != 1 || r.ProcessGoroutines <= 0 || r.ServerGoroutines <= 0 {
		t.Errorf("connections or goroutines: %+v", r)
	}
	if !strings.Contains(rep.Sync, "always") {
		t.Errorf("sync %q: the zero Sync flushes every write", rep.Sync)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "per tenant:") || !strings.Contains(out.String(), "no NATS baseline") {
		t.Errorf("table:\n%s", out.String())
	}
}
