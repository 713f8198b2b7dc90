package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/ops/tenants"
)

// `sessionbus bench --tenants 1,10,30` (docs/scale.md): what an idle
// tenant costs on a 3-node cluster. For each count, a fresh in-process
// cluster with that many accounts; every tenant's worker and gateway run
// in one tenants.Host (the layout `worker --tenants-dir` runs), streams
// and buckets R3. Nothing here has a NATS counterpart to be a ratio of:
// the figures are absolute, per tenant, with the sync setting.
//
// Everything shares one process, so memory and CPU are split by
// difference: the cluster alone (before any tenant), with the tenants
// running, and again after their workers and gateways stopped (their
// streams, buckets and Raft groups still on the servers).

// Defaults of TenantsOptions.
const (
	DefaultTenantsIdle   = 10 * time.Second
	DefaultTenantsSettle = 5 * time.Second
	tenantsNodes         = 3
)

// TenantsOptions configure a tenants run.
type TenantsOptions struct {
	Counts []int         // tenant counts, one cluster each (default 1, 10, 30)
	Idle   time.Duration // each idle CPU window (default 10 s)
	// Settle is the wait after a change (tenants started or stopped)
	// before measuring: elections and first heartbeats are not idle.
	Settle time.Duration
	Sync   embedded.Sync
	Log    io.Writer
}

// TenantsRow is one tenant count's figures. Per-tenant figures are the
// difference from the cluster without tenants, divided by the count.
type TenantsRow struct {
	Tenants int `json:"tenants"`
	// Assets in the cluster, counted on the meta leader.
	Streams   int `json:"streams"`    // streams, KV buckets' and object stores' included
	Buckets   int `json:"kv_buckets"` // of which KV buckets
	Objects   int `json:"object_stores"`
	Consumers int `json:"consumers"`
	// RaftGroupsPerServer is the most Raft groups (HA assets) any node
	// runs: the meta group, one per R3 stream and one per R3 consumer.
	RaftGroupsPerServer int `json:"raft_groups_per_server"`
	Connections         int `json:"connections"` // client connections on all nodes
	// Per tenant.
	StreamsPerTenant     float64 `json:"streams_per_tenant"`
	ConsumersPerTenant   float64 `json:"consumers_per_tenant"`
	RaftPerTenantServer  float64 `json:"raft_groups_per_tenant_per_server"`
	ConnsPerTenant       float64 `json:"connections_per_tenant"`
	ServerHeapPerTenant  float64 `json:"server_heap_kb_per_tenant"`         // all three nodes' share, KiB
	ProcessHeapPerTenant float64 `json:"worker_gateway_heap_kb_per_tenant"` // KiB
	ServerGoroutines     float64 `json:"server_goroutines_per_tenant"`
	ProcessGoroutines    float64 `json:"worker_gateway_goroutines_per_tenant"`
	ServerIdleCPU        float64 `json:"server_idle_cpu_ms_per_s_per_tenant"`         // all three nodes, ms of CPU per second
	ProcessIdleCPU       float64 `json:"worker_gateway_idle_cpu_ms_per_s_per_tenant"` // ms of CPU per second
	// APIPerTenant is the JetStream API requests per second an idle
	// tenant's worker and gateway make (as the nodes count them received).
	APIPerTenant     float64 `json:"js_api_per_s_per_tenant"`
	DiskPerTenant    float64 `json:"disk_kb_per_tenant"`        // the three nodes' stores, KiB
	StartSeconds     float64 `json:"start_seconds"`             // starting every tenant (streams created R3)
	ClusterIdleCPU   float64 `json:"cluster_idle_cpu_ms_per_s"` // the cluster before any tenant
	ClusterHeapKB    float64 `json:"cluster_heap_kb"`           // the cluster before any tenant
	TotalIdleCPU     float64 `json:"total_idle_cpu_ms_per_s"`   // everything, tenants running
	TotalHeapKB      float64 `json:"total_heap_kb"`             // everything, tenants running
	LoadAverageAfter string  `json:"load_average"`
}

// TenantsReport is a tenants run: what `bench --tenants --json` prints.
type TenantsReport struct {
	Go         string       `json:"go"`
	CPUs       int          `json:"cpus"`
	NATSServer string       `json:"nats_server"`
	Nodes      int          `json:"nodes"`
	Replicas   int          `json:"replicas"`
	Sync       string       `json:"sync"`
	IdleWindow float64      `json:"idle_window_seconds"`
	Rows       []TenantsRow `json:"rows"`
}

// sample is one look at the process and the cluster.
type sample struct {
	heap       uint64
	goroutines int
	cpu        float64 // ms per second over the idle window
	api        float64 // JetStream API requests per second over the idle window
	jsz        tenantsJsz
}

type tenantsJsz struct {
	streams, buckets, objects, consumers, raft, conns int
	api                                               uint64 // API requests the nodes received since start
}

// RunTenants measures each count in o.Counts on a cluster of its own.
func RunTenants(ctx context.Context, o TenantsOptions) (*TenantsReport, error) {
	if len(o.Counts) == 0 {
		o.Counts = []int{1, 10, 30}
	}
	if o.Idle <= 0 {
		o.Idle = DefaultTenantsIdle
	}
	if o.Settle <= 0 {
		o.Settle = DefaultTenantsSettle
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	rep := &TenantsReport{Go: runtime.Version(), CPUs: runtime.NumCPU(), NATSServer: server.VERSION,
		Nodes: tenantsNodes, Replicas: tenantsNodes, IdleWindow: o.Idle.Seconds()}
	for _, n := range o.Counts {
		if n < 1 {
			return nil, fmt.Errorf("tenant count %d: give counts of 1 or more, e.g. 1,10,30", n)
		}
		row, sync, err := runTenantCount(ctx, n, o)
		if err != nil {
			return nil, fmt.Errorf("%d tenants: %w", n, err)
		}
		rep.Sync = sync
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

func runTenantCount(ctx context.Context, n int, o TenantsOptions) (row TenantsRow, syncDesc string, err error) {
	dir, err := os.MkdirTemp("", "sessionbus-tenants-")
	if err != nil {
		return row, "", err
	}
	defer os.RemoveAll(dir)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("T%05d", i)
	}
	d, err := auth.LoadOrCreate(filepath.Join(dir, auth.Dir), names...)
	if err != nil {
		return row, "", err
	}
	fmt.Fprintf(o.Log, "tenants %d: starting a %d-node cluster\n", n, tenantsNodes)
	c, err := embedded.StartLoopbackCluster(filepath.Join(dir, "nodes"), "sessionbus-tenants", tenantsNodes, o.Sync, d)
	if err != nil {
		return row, "", err
	}
	defer c.Shutdown()
	syncDesc = syncSetting(c.Server(0).JetStreamConfig())
	if err := bus.Sleep(ctx, o.Settle); err != nil {
		return row, "", err
	}
	base, err := measureTenants(ctx, c, o.Idle)
	if err != nil {
		return row, "", err
	}
	cdir := filepath.Join(dir, "tenants")
	if err := writeTenantsDir(d, cdir, names); err != nil {
		return row, "", err
	}
	list, err := tenants.Dir(cdir)
	if err != nil {
		return row, "", err
	}
	cfg := config.Default()
	cfg.Bus.Replicas = tenantsNodes
	log := slog.New(slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelError}))
	fmt.Fprintf(o.Log, "tenants %d: starting every tenant's worker and gateway (streams and buckets R%d)\n", n, tenantsNodes)
	start := time.Now()
	h, err := startTenantsRetrying(ctx, list, tenants.Options{Servers: c.URLs(), Config: cfg, Log: log})
	if err != nil {
		return row, "", err
	}
	started := round(time.Since(start).Seconds(), 1)
	stopped := false
	defer func() {
		if !stopped {
			h.Stop(0)
		}
	}()
	if err := bus.Sleep(ctx, o.Settle); err != nil {
		return row, "", err
	}
	fmt.Fprintf(o.Log, "tenants %d: idle %v with the tenants running\n", n, o.Idle)
	up, err := measureTenants(ctx, c, o.Idle)
	if err != nil {
		return row, "", err
	}
	h.Stop(0)
	stopped = true
	if err := bus.Sleep(ctx, o.Settle); err != nil {
		return row, "", err
	}
	fmt.Fprintf(o.Log, "tenants %d: idle %v with the workers and gateways stopped\n", n, o.Idle)
	down, err := measureTenants(ctx, c, o.Idle)
	if err != nil {
		return row, "", err
	}
	row = tenantsRow(n, base, up, down, dirKB(filepath.Join(dir, "nodes")))
	row.StartSeconds = started
	return row, syncDesc, nil
}

// startTenantsRetrying gives the tenants a minute: right after the first
// election the meta leader can still move and R3 creates fail, as serve
// --cluster retries too.
func startTenantsRetrying(ctx context.Context, list []tenants.Tenant, o tenants.Options) (*tenants.Host, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		h, err := tenants.Start(ctx, list, o)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return h, err
		}
		if err := bus.Sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// writeTenantsDir writes one gateway credentials file per tenant, each
// with a token key of its own, as `sessionbus creds --account` does.
func writeTenantsDir(d *auth.Deployment, dir string, names []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, n := range names {
		u, err := d.Mint(n, auth.RoleGateway, "tenant-"+n, "", 0)
		if err != nil {
			return err
		}
		b, err := u.Creds()
		if err != nil {
			return err
		}
		op, err := bus.NewOperator()
		if err != nil {
			return err
		}
		seed, err := op.Seed()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n+tenants.CredsExt), append(append(b, '\n'), seed...), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// measureTenants takes the live heap (after a collection), the goroutines, the
// cluster's assets and the process's CPU over an idle window.
func measureTenants(ctx context.Context, c *embedded.Cluster, idle time.Duration) (sample, error) {
	var s sample
	before, err := clusterJsz(c)
	if err != nil {
		return s, err
	}
	cpu0, t0 := processCPU(), time.Now()
	if err := bus.Sleep(ctx, idle); err != nil {
		return s, err
	}
	took := time.Since(t0)
	s.cpu = float64(processCPU()-cpu0) / float64(took) * 1000
	if s.jsz, err = clusterJsz(c); err != nil {
		return s, err
	}
	s.api = float64(s.jsz.api-before.api) / took.Seconds()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.heap, s.goroutines = ms.HeapAlloc, runtime.NumGoroutine()
	return s, nil
}

// clusterJsz counts what the cluster holds: streams and consumers as the
// meta leader sees them, Raft groups on the busiest node, connections on
// every node.
func clusterJsz(c *embedded.Cluster) (tenantsJsz, error) {
	var out tenantsJsz
	leader := c.MetaLeader()
	if leader < 0 {
		leader = 0
	}
	for i := range c.Len() {
		s := c.Server(i)
		if s == nil {
			continue
		}
		jsz, err := s.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
		if err != nil {
			return out, err
		}
		out.raft = max(out.raft, jsz.HAAssets)
		out.api += jsz.API.Total
		out.conns += s.NumClients()
		if i != leader {
			continue
		}
		out.streams, out.consumers = jsz.Streams, jsz.Consumers
		for _, a := range jsz.AccountDetails {
			for _, st := range a.Streams {
				switch {
				case strings.HasPrefix(st.Name, "KV_"):
					out.buckets++
				case strings.HasPrefix(st.Name, "OBJ_"):
					out.objects++
				}
			}
		}
	}
	return out, nil
}

func tenantsRow(n int, base, up, down sample, diskKB float64) TenantsRow {
	per := func(v float64) float64 { return round(v/float64(n), 2) }
	kb := func(b uint64) float64 { return float64(b) / 1024 }
	return TenantsRow{
		Tenants: n, Streams: up.jsz.streams, Buckets: up.jsz.buckets, Objects: up.jsz.objects,
		Consumers: up.jsz.consumers, RaftGroupsPerServer: up.jsz.raft, Connections: up.jsz.conns,
		StreamsPerTenant:     per(float64(up.jsz.streams - base.jsz.streams)),
		ConsumersPerTenant:   per(float64(up.jsz.consumers - base.jsz.consumers)),
		RaftPerTenantServer:  per(float64(up.jsz.raft - base.jsz.raft)),
		ConnsPerTenant:       per(float64(up.jsz.conns - base.jsz.conns)),
		ServerHeapPerTenant:  per(kb(down.heap) - kb(base.heap)),
		ProcessHeapPerTenant: per(kb(up.heap) - kb(down.heap)),
		ServerGoroutines:     per(float64(down.goroutines - base.goroutines)),
		ProcessGoroutines:    per(float64(up.goroutines - down.goroutines)),
		ServerIdleCPU:        per(down.cpu - base.cpu),
		ProcessIdleCPU:       per(up.cpu - down.cpu),
		APIPerTenant:         per(up.api - down.api),
		DiskPerTenant:        per(diskKB),
		ClusterIdleCPU:       round(base.cpu, 2),
		ClusterHeapKB:        round(kb(base.heap), 0),
		TotalIdleCPU:         round(up.cpu, 2),
		TotalHeapKB:          round(kb(up.heap), 0),
		LoadAverageAfter:     loadAverage(),
	}
}

// dirKB is the size of the files under dir, KiB.
func dirKB(dir string) float64 {
	var total int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			total += fi.Size()
		}
		return nil
	})
	return float64(total) / 1024
}

// WriteJSON prints the report as one JSON object.
func (r *TenantsReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable prints the report for people: the assets, then the
// per-tenant costs.
func (r *TenantsReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "tenants: %d-node in-process cluster, R%d, sync %s, idle window %.0fs, %s, nats-server %s, %d CPUs; per-tenant figures are absolute (no NATS baseline)\n",
		r.Nodes, r.Replicas, r.Sync, r.IdleWindow, r.Go, r.NATSServer, r.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenants\tstreams\tkv\tobj\tconsumers\traft/server\tconns\tstart s\tload avg\t")
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t\n", x.Tenants, x.Streams, x.Buckets, x.Objects, x.Consumers, x.RaftGroupsPerServer, x.Connections, x.StartSeconds, x.LoadAverageAfter)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "per tenant:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenants\tstreams\tconsumers\traft/server\tconns\tserver KiB\tworker+gw KiB\tserver gor.\tworker+gw gor.\tserver cpu ms/s\tworker+gw cpu ms/s\tJS API/s\tdisk KiB\t")
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.0f\t\n", x.Tenants, x.StreamsPerTenant, x.ConsumersPerTenant,
			x.RaftPerTenantServer, x.ConnsPerTenant, x.ServerHeapPerTenant, x.ProcessHeapPerTenant, x.ServerGoroutines, x.ProcessGoroutines,
			x.ServerIdleCPU, x.ProcessIdleCPU, x.APIPerTenant, x.DiskPerTenant)
	}
	return tw.Flush()
}
