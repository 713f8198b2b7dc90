// Package bench is the `sessionbus bench` suite: each benchmark runs against
// an embedded server in a temp dir, in one process, together with the raw
// NATS baselines measured in the same run (docs/performance.md gives the
// figures and the commands). The JSON fields of Result are a public
// contract. Latency is measured per operation, sequentially, after a
// warm-up; ops_per_sec is ops / wall time of the timed loop.
//
// Each benchmark's result names its baseline and carries ratio = p50 / the
// baseline's p50. A baseline names itself and has ratio 1. sanitize_80k is
// pure CPU work with no NATS counterpart, and raw_fsync_* the disk with no
// NATS at all: they have neither field.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sessionbus/sessionbus/bus/embedded"
)

// Options select and scale a run.
type Options struct {
	// Only selects benchmarks by name; the baselines they reference run
	// too. Empty runs everything.
	Only []string
	// Quick scales every data set and iteration count down (for tests).
	Quick bool
	// Log receives progress lines (loads, each benchmark as it runs) and
	// worker warnings. Nil discards them.
	Log io.Writer
	// TCP connects the worker and the gateways over TCP loopback, as
	// separate processes would; by default they connect in-process, as
	// `serve` runs them. The client (and so every baseline) always uses TCP.
	TCP bool
	// Sync is the embedded server's JetStream sync; the zero value flushes
	// every write before acknowledging it, as serve does by default.
	Sync embedded.Sync
	// Insecure runs the server without NATS-level auth, as `serve
	// --insecure` does; by default it runs with auth, as serve does.
	Insecure bool
	// Idle is how long bytes_per_session_100k sits idle between its two
	// measurements; zero is two lifecycle sweeps and a little.
	Idle time.Duration
	// HeapProfile, when set, is where bytes_per_session_100k writes the
	// heap profiles of its two measurements (HeapProfile+".load" and
	// HeapProfile+".idle", each after the GC it measures), so what holds
	// the heap at each can be read with go tool pprof.
	HeapProfile string
}

// Result is one benchmark's figures. Field names are the public JSON contract.
type Result struct {
	Name      string  `json:"name"`
	Ops       int     `json:"ops"`
	P50       int64   `json:"p50_ns"`
	P99       int64   `json:"p99_ns"`
	OpsPerSec float64 `json:"ops_per_sec"`
	// Baseline is the raw NATS benchmark this one is compared with; a
	// baseline names itself. Empty (omitted) for sanitize_80k and raw_fsync_*.
	Baseline string `json:"baseline,omitempty"`
	// Ratio is P50 / the baseline's P50 (1 for a baseline). Omitted with Baseline.
	Ratio *float64 `json:"ratio,omitempty"`
	// Sync is the JetStream sync setting the server ran with.
	Sync string `json:"sync"`
	// Dataset says what the benchmark ran over (sizes differ with --quick).
	Dataset string `json:"dataset"`

	// Extras, set by some benchmarks only.
	BytesPerSession *float64 `json:"bytes_per_session,omitempty"` // list_*: heap of a kv.Index / indexed sessions
	MBPerSec        *float64 `json:"mb_per_sec,omitempty"`        // sanitize_80k: 10^6 bytes per second of input
	IndexStartMs    *float64 `json:"index_start_ms,omitempty"`    // list_*: time that kv.Index took to load every session
	ReplyBytes      int      `json:"reply_bytes,omitempty"`       // tool benchmarks: size of one reply body
	ThroughputVs1gw *float64 `json:"throughput_vs_1gw,omitempty"` // send_throughput_2gw*: ops_per_sec / the 1-gateway variant's (same delay, same run)
	// WritesPerSend is send_concurrent's and the raw_send_chain rows' stream
	// writes per send, by stream (compaction's: per compaction).
	WritesPerSend map[string]float64 `json:"writes_per_send,omitempty"`
	CacheBytes    *int               `json:"cache_bytes,omitempty"` // history_*: bytes the worker's view cache holds after the run (views plus overhead)
	// CPUPerOp is the process's CPU time (user and system: server, worker,
	// gateways and client together) over the timed operations, per
	// operation, in µs. Omitted where the platform has no getrusage.
	CPUPerOp *float64 `json:"cpu_us_per_op,omitempty"`
	// flood_p99: the quiet caller's sessions_list latency before the flood
	// (P50 and P99 are during it), the flooded p99 over the quiet one, and
	// the flooding caller's calls per second and the share of them refused.
	QuietP50      int64    `json:"quiet_p50_ns,omitempty"`
	QuietP99      int64    `json:"quiet_p99_ns,omitempty"`
	FloodP99Ratio *float64 `json:"flood_p99_ratio,omitempty"`
	FloodPerSec   *float64 `json:"flood_calls_per_sec,omitempty"`
	FloodRefused  *float64 `json:"flood_refused_share,omitempty"`
	// The garbage collector over the timed operations (runtime/metrics
	// of this process): cycles, the p99 of its stop-the-world pauses, and
	// its share of the process's CPU capacity (GOMAXPROCS x wall time).
	GCCycles   *int     `json:"gc_cycles,omitempty"`
	GCPauseP99 *int64   `json:"gc_pause_p99_ns,omitempty"`
	GCCPUShare *float64 `json:"gc_cpu_share,omitempty"`
	// list_restart_1m: the caller's sessions_list p99 while one of three
	// workers restarts over its quiet p99 (QuietP99), the restarts the
	// timed calls spanned, and the calls that failed (the bar: none).
	RestartP99Ratio *float64 `json:"restart_p99_ratio,omitempty"`
	Restarts        *int     `json:"restarts,omitempty"`
	FailedCalls     *int     `json:"failed_calls,omitempty"`
	// cron_idle_10k: the process's heap per idle cron job, and its CPU per
	// minute (ms) while they sit idle.
	BytesPerJob   *float64 `json:"bytes_per_job,omitempty"`
	IdleCPUPerMin *float64 `json:"idle_cpu_ms_per_min,omitempty"`
	// search_1m: the transcript search index's size on disk per entry,
	// and how fast a rebuild from the stream indexed.
	IndexBytesPerEntry *float64 `json:"index_bytes_per_entry,omitempty"`
	RebuildPerSec      *float64 `json:"rebuild_entries_per_sec,omitempty"`
	// bytes_per_session_100k: the process's live heap per session after a
	// GC, with the sessions loaded and again after the idle period; its
	// RSS then (MiB), after the idle period and the most it reached in
	// between; how long it sat idle (IdleCPUPerMin is its CPU meanwhile).
	HeapPerSession     *float64 `json:"heap_bytes_per_session,omitempty"`
	HeapPerSessionIdle *float64 `json:"heap_bytes_per_session_idle,omitempty"`
	RSSMB              *float64 `json:"rss_mb,omitempty"`
	RSSMBIdle          *float64 `json:"rss_mb_idle,omitempty"`
	RSSMBPeak          *float64 `json:"rss_mb_peak,omitempty"`
	IdleSeconds        *float64 `json:"idle_seconds,omitempty"`
}

// Load is one shared data load, timed.
type Load struct {
	Name    string  `json:"name"`
	Items   int     `json:"items"`
	Seconds float64 `json:"seconds"`
}

// Report is the whole run: what `--json` prints.
type Report struct {
	Go         string `json:"go"`
	CPUs       int    `json:"cpus"`
	NATSServer string `json:"nats_server"`
	Quick      bool   `json:"quick,omitempty"`
	Auth       bool   `json:"nats_auth,omitempty"` // false under bench --insecure
	// Internal is how the worker and gateways connect: "in-process" (as
	// serve runs them) or "tcp" (as separate processes).
	Internal string   `json:"internal_connections"`
	Results  []Result `json:"results"`
	Loads    []Load   `json:"loads,omitempty"`
	// Quotas is what quotas the bench's worker ran with.
	Quotas string `json:"quotas"`
}

// spec is one registered benchmark.
type spec struct {
	name     string
	baseline string // "" for baselines themselves, sanitize_80k and raw_fsync_*
	isBase   bool
	run      func(ctx context.Context, e *env) (Result, error)
}

// registry lists every benchmark in execution order: the quick baselines on
// a quiet server first, then each family after the loads it needs (shared
// across families, done once per run).
var registry = []spec{
	{name: "raw_request_reply", isBase: true, run: runRawRequestReply},
	{name: "raw_js_publish", isBase: true, run: runRawJSPublish},
	{name: "raw_kv_get", isBase: true, run: runRawKVGet},
	{name: "session_status", baseline: "raw_kv_get", run: runSessionStatus},
	{name: "client_roundtrip", baseline: "raw_request_reply", run: runClientRoundtrip},
	{name: "mcp_roundtrip", baseline: "client_roundtrip", run: runMCPRoundtrip},
	{name: "stream_delta", baseline: "raw_request_reply", run: runStreamDelta},
	// The list family runs before the gateway benchmarks: their sessions
	// (the main session with hundreds of children) would otherwise be the
	// newest rows, and list_100k would page through them instead of the
	// inventory its dataset names (`--only list_100k` and a full run then
	// measure the same page).
	{name: "list_10k", baseline: "raw_request_reply", run: runList10k},
	{name: "flood_p99", baseline: "raw_request_reply", run: runFloodP99},
	{name: "list_100k", baseline: "raw_request_reply", run: runList100k},
	{name: "console_list_100k", baseline: "list_100k", run: runConsoleList100k},
	{name: "list_label_100k", baseline: "raw_request_reply", run: runListLabel100k},
	{name: "list_search_100k", baseline: "raw_request_reply", run: runListSearch100k},
	// before the million rows load the bucket past 100k
	{name: "bytes_per_session_100k", baseline: "list_100k", run: runBytesPerSession100k},
	// A million sessions (docs/scale.md); every later benchmark runs with
	// them indexed.
	{name: "list_1m", baseline: "list_10k", run: runList1M},
	{name: "list_label_1m", baseline: "raw_request_reply", run: runListLabel1M},
	{name: "list_search_1m", baseline: "raw_request_reply", run: runListSearch1M},
	{name: "session_status_1m", baseline: "raw_kv_get", run: runSessionStatus1M},
	{name: "raw_kv_watch_1m", isBase: true, run: runRawKVWatch1M},
	{name: "worker_cold_start_1m", baseline: "raw_kv_watch_1m", run: runWorkerColdStart1M},
	{name: "list_restart_1m", baseline: "list_1m", run: runListRestart1M},
	{name: "send_wait", baseline: "raw_js_publish", run: runSendWait},
	{name: "send_wait_long", baseline: "send_wait", run: runSendWaitLong},
	{name: "announce_latency", baseline: "raw_js_publish", run: runAnnounceLatency},
	{name: "board_update", baseline: "announce_latency", run: runBoardUpdate},
	{name: "raw_send_chain", baseline: "raw_js_publish", run: runRawSendChain},
	{name: "raw_send_chain_3wave", baseline: "raw_js_publish", run: runRawSendChain3Wave},
	{name: "raw_send_chain_2wave", baseline: "raw_js_publish", run: runRawSendChain2Wave},
	{name: "inbound_turn", baseline: "raw_js_publish", run: runInboundTurn},
	{name: "stop_latency", baseline: "raw_js_publish", run: runStopLatency},
	{name: "steer_latency", baseline: "raw_js_publish", run: runSteerLatency},
	{name: "send_throughput_1gw", baseline: "send_wait", run: runSendThroughput1gw},
	{name: "send_throughput_2gw", baseline: "send_wait", run: runSendThroughput2gw},
	{name: "send_throughput_1gw_delay20", baseline: "send_wait", run: runSendThroughput1gwDelay20},
	{name: "send_throughput_2gw_delay20", baseline: "send_wait", run: runSendThroughput2gwDelay20},
	{name: "send_concurrent", baseline: "send_wait", run: runSendConcurrent},
	{name: "raw_fsync_1file", run: runRawFsync1},
	{name: "raw_fsync_6files", run: runRawFsync6},
	{name: "raw_js_publish_concurrent", baseline: "raw_js_publish", run: runRawJSPublishConcurrent},
	{name: "raw_js_publish_concurrent_1s", baseline: "raw_js_publish", run: runRawJSPublishConcurrent1s},
	{name: "raw_send_concurrent", baseline: "raw_js_publish", run: runRawSendConcurrent},
	{name: "raw_send_concurrent_7w", baseline: "raw_js_publish", run: runRawSendConcurrent7w},
	{name: "raw_send_concurrent_6w", baseline: "raw_js_publish", run: runRawSendConcurrent6w},
	{name: "raw_send_concurrent_6w_built", baseline: "raw_js_publish", run: runRawSendConcurrent6wBuilt},
	{name: "raw_send_concurrent_5w", baseline: "raw_js_publish", run: runRawSendConcurrent5w},
	{name: "raw_send_concurrent_6w_apart", baseline: "raw_js_publish", run: runRawSendConcurrent6wApart},
	{name: "raw_direct_get_50", isBase: true, run: runRawDirectGet50},
	{name: "transcript_tail_interleaved", baseline: "raw_direct_get_50", run: runTranscriptTailInterleaved},
	{name: "transcript_tail_1m", baseline: "raw_direct_get_50", run: runTranscriptTail1M},
	{name: "transcript_offset_1m", baseline: "raw_direct_get_50", run: runTranscriptOffset1M},
	{name: "history_tail_100", baseline: "raw_direct_get_50", run: runHistoryTail100},
	{name: "history_tail_1m", baseline: "raw_direct_get_50", run: runHistoryTail1M},
	{name: "history_tail_1m_cold", baseline: "raw_direct_get_50", run: runHistoryTail1MCold},
	{name: "history_offset_1m", baseline: "raw_direct_get_50", run: runHistoryOffset1M},
	{name: "history_offset_deep", baseline: "history_tail_1m", run: runHistoryOffsetDeep},
	{name: "history_tail_interleaved", baseline: "raw_direct_get_50", run: runHistoryTailInterleaved},
	{name: "spawn_accept", baseline: "raw_js_publish", run: runSpawnAccept},
	{name: "archive_10k", baseline: "raw_direct_get_50", run: runArchive10k},
	{name: "archive_read_10k", baseline: "raw_direct_get_50", run: runArchiveRead10k},
	{name: "search_1m", baseline: "raw_request_reply", run: runSearch1M},
	{name: "index_lag", baseline: "raw_js_publish", run: runIndexLag},
	// after the list and million rows: its 100k sessions join the bucket
	{name: "import_100k", baseline: "raw_js_publish", run: runImport100k},
	// after every benchmark that runs gateways: the turns it queues stay
	// queued, and no later gateway must pick them up
	{name: "inbound_routed", baseline: "raw_js_publish", run: runInboundRouted},
	{name: "compaction", baseline: "raw_js_publish", run: runCompaction},
	// cron last: its runs queue in SB_RUNS for no gateway
	{name: "cron_tick_to_run", baseline: "raw_js_publish", run: runCronTickToRun},
	{name: "cron_idle_10k", baseline: "raw_js_publish", run: runCronIdle10k},
	{name: "sanitize_80k", run: runSanitize80k},
}

// Names lists every benchmark name, in execution order.
func Names() []string {
	out := make([]string, len(registry))
	for i, s := range registry {
		out[i] = s.name
	}
	return out
}

// Check reports whether every name in only is a benchmark (what Run would
// refuse), so a CLI can tell a usage error from a failed run.
func Check(only []string) error {
	_, err := selectSpecs(only)
	return err
}

// selectSpecs resolves Options.Only (plus the baselines it references).
func selectSpecs(only []string) ([]spec, error) {
	if len(only) == 0 {
		return registry, nil
	}
	want := map[string]bool{}
	for _, n := range only {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		i := slices.IndexFunc(registry, func(s spec) bool { return s.name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown benchmark %q; known: %s", n, strings.Join(Names(), ", "))
		}
		// the baseline, and its baseline in turn (send_throughput_* -> send_wait -> raw_js_publish)
		for want[n] = true; registry[i].baseline != ""; {
			n = registry[i].baseline
			want[n] = true
			i = slices.IndexFunc(registry, func(s spec) bool { return s.name == n })
		}
	}
	if len(want) == 0 {
		return nil, errors.New("--only names no benchmark")
	}
	var out []spec
	for _, s := range registry {
		if want[s.name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// Run executes the selected benchmarks against a fresh embedded server in a
// temp dir (removed afterwards) and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	specs, err := selectSpecs(o.Only)
	if err != nil {
		return nil, err
	}
	e, err := newEnv(ctx, o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	rep := &Report{Go: runtime.Version(), CPUs: runtime.NumCPU(), NATSServer: e.serverVersion(), Quick: o.Quick, Internal: "in-process", Auth: !o.Insecure, Quotas: suiteQuotaNote}
	if o.TCP {
		rep.Internal = "tcp"
	}
	e.logf("sessionbus bench: %s, %d cpus, GOMAXPROCS %d, nats-server %s, sync %s, NATS auth %v, data in %s",
		rep.Go, rep.CPUs, runtime.GOMAXPROCS(0), rep.NATSServer, e.sync, !o.Insecure, e.dir)
	for _, s := range specs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := s.run(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		r.Name = s.name
		if s.isBase {
			r.Baseline = s.name
		} else {
			r.Baseline = s.baseline
		}
		if r.Sync == "" {
			r.Sync = e.sync
		}
		rep.Results = append(rep.Results, r)
		e.logf("  %-28s p50 %-9s p99 %-9s %10.0f ops/s  (%d ops)%s", s.name, fmtDur(r.P50), fmtDur(r.P99), r.OpsPerSec, r.Ops, progressExtra(r))
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Baseline == "" {
			continue
		}
		j := slices.IndexFunc(rep.Results, func(b Result) bool { return b.Name == r.Baseline })
		if j < 0 || rep.Results[j].P50 <= 0 {
			return nil, fmt.Errorf("%s: baseline %s did not run", r.Name, r.Baseline)
		}
		ratio := round(float64(r.P50)/float64(rep.Results[j].P50), 3)
		r.Ratio = &ratio
	}
	rep.Loads = e.loads
	return rep, nil
}

// progressExtra is what the progress line adds for the rows that measure
// an index (so a run cut short still shows it).
func progressExtra(r Result) string {
	if r.BytesPerSession == nil || r.GCCycles == nil {
		return ""
	}
	return fmt.Sprintf("  %.0f B/session, gc %d cycles, pause p99 %s, %.1f%% cpu", *r.BytesPerSession, *r.GCCycles, fmtDur(*r.GCPauseP99), 100**r.GCCPUShare)
}

// plan is how often a benchmark's operation runs.
type plan struct{ warm, ops int }

// measure runs op warm times untimed, collects garbage, then times ops
// sequential calls one by one.
func measure(ctx context.Context, p plan, op func() error) (Result, error) {
	return measureSpans(ctx, p, func() (time.Duration, error) {
		t0 := time.Now()
		err := op()
		return time.Since(t0), err
	})
}

// measureSpans is measure for an operation that times a span inside
// itself (from one event it observes to another) and returns it.
func measureSpans(ctx context.Context, p plan, op func() (time.Duration, error)) (Result, error) {
	runtime.GC()
	for i := 0; i < p.warm; i++ {
		if _, err := op(); err != nil {
			return Result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	runtime.GC()
	samples := make([]time.Duration, p.ops)
	gc0 := readGC()
	cpu0 := processCPU()
	start := time.Now()
	for i := range samples {
		if i%256 == 0 && ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		d, err := op()
		if err != nil {
			return Result{}, fmt.Errorf("op %d: %w", i, err)
		}
		samples[i] = d
	}
	wall := time.Since(start)
	cpu := processCPU() - cpu0
	gc := readGC().since(gc0)
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	r := Result{
		Ops:       p.ops,
		P50:       int64(percentile(samples, 0.50)),
		P99:       int64(percentile(samples, 0.99)),
		OpsPerSec: round(float64(p.ops)/wall.Seconds(), 1),
		CPUPerOp:  cpuPerOp(cpu, p.ops),
	}
	gc.set(&r)
	return r, nil
}

// cpuPerOp is cpu spread over ops, in µs; nil where CPU is not measured.
func cpuPerOp(cpu time.Duration, ops int) *float64 {
	if cpu <= 0 || ops <= 0 {
		return nil
	}
	return f64(round(float64(cpu)/float64(time.Microsecond)/float64(ops), 1))
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// WriteJSON prints the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// WriteTable prints the report as a readable table.
func (r *Report) WriteTable(w io.Writer) error {
	mode := ""
	if r.Auth {
		mode = ", NATS auth on (serve's roles)"
	}
	if r.Quick {
		mode += " (--quick: reduced data sets)"
	}
	fmt.Fprintf(w, "sessionbus bench: %s, %d cpus, nats-server %s, worker and gateways %s, client tcp%s\n", r.Go, r.CPUs, r.NATSServer, r.Internal, mode)
	fmt.Fprintf(w, "quotas: %s\n\n", r.Quotas)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tops\tp50\tp99\tops/s\tbaseline\tratio\textra\tsync")
	for _, res := range r.Results {
		ratio, base := "-", "-"
		if res.Ratio != nil {
			ratio = fmt.Sprintf("%.2fx", *res.Ratio)
		}
		if res.Baseline == res.Name {
			base = "(baseline)"
		} else if res.Baseline != "" {
			base = res.Baseline
		}
		var extra []string
		if res.BytesPerSession != nil {
			extra = append(extra, fmt.Sprintf("%.0f B/session", *res.BytesPerSession))
		}
		if res.BytesPerJob != nil && res.IdleCPUPerMin != nil {
			extra = append(extra, fmt.Sprintf("%.0f B/job, idle %.0f ms cpu/min", *res.BytesPerJob, *res.IdleCPUPerMin))
		}
		if res.GCCycles != nil && res.BytesPerSession != nil {
			extra = append(extra, fmt.Sprintf("gc %d cycles, pause p99 %s, %.1f%% cpu", *res.GCCycles, fmtDur(*res.GCPauseP99), 100**res.GCCPUShare))
		}
		if res.RestartP99Ratio != nil && res.Restarts != nil && res.FailedCalls != nil {
			extra = append(extra, fmt.Sprintf("quiet p99 %s, p99 %.2fx quiet over %d restarts, %d failed", fmtDur(res.QuietP99), *res.RestartP99Ratio, *res.Restarts, *res.FailedCalls))
		}
		if res.IndexStartMs != nil {
			extra = append(extra, fmt.Sprintf("index start %.0f ms", *res.IndexStartMs))
		}
		if res.MBPerSec != nil {
			extra = append(extra, fmt.Sprintf("%.1f MB/s", *res.MBPerSec))
		}
		if len(res.WritesPerSend) > 0 {
			total := 0.0
			for _, w := range res.WritesPerSend {
				total += w
			}
			extra = append(extra, fmt.Sprintf("%.2f writes/send", total))
		}
		if res.ThroughputVs1gw != nil {
			extra = append(extra, fmt.Sprintf("%.2fx 1gw ops/s", *res.ThroughputVs1gw))
		}
		if res.ReplyBytes > 0 {
			extra = append(extra, fmt.Sprintf("reply %s", fmtBytes(res.ReplyBytes)))
		}
		if res.CacheBytes != nil {
			extra = append(extra, fmt.Sprintf("view cache %s", fmtBytes(*res.CacheBytes)))
		}
		if res.CPUPerOp != nil {
			extra = append(extra, fmt.Sprintf("cpu %.0fµs/op", *res.CPUPerOp))
		}
		if res.FloodP99Ratio != nil && res.FloodPerSec != nil && res.FloodRefused != nil {
			extra = append(extra, fmt.Sprintf("quiet p50 %s p99 %s, flooded p99 %.2fx quiet, flood %.0f calls/s %.1f%% refused",
				fmtDur(res.QuietP50), fmtDur(res.QuietP99), *res.FloodP99Ratio, *res.FloodPerSec, 100**res.FloodRefused))
		}
		ex := strings.Join(extra, ", ")
		if ex == "" {
			ex = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\n",
			res.Name, res.Ops, fmtDur(res.P50), fmtDur(res.P99), res.OpsPerSec, base, ratio, ex, res.Sync)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\ndatasets:")
	for _, res := range r.Results {
		fmt.Fprintf(w, "  %-28s %s\n", res.Name, res.Dataset)
	}
	if len(r.Loads) > 0 {
		fmt.Fprintln(w, "\nloads:")
		for _, l := range r.Loads {
			rate := ""
			if l.Seconds > 0 {
				rate = fmt.Sprintf(" (%.0f/s)", float64(l.Items)/l.Seconds)
			}
			fmt.Fprintf(w, "  %-56s %8d in %7.3fs%s\n", l.Name, l.Items, l.Seconds, rate)
		}
	}
	return nil
}

func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func fmtBytes(n int) string {
	if n < 10*1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}
