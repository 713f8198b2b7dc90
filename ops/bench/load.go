package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
)

// `sessionbus bench --load DURATION` (docs/performance.md): sustained mixed
// tool traffic from concurrent clients, each a requester session with its
// own token. Each client spawns one child first (its target), then loops
// over loadMix: list, history and status of its target, a send that waits
// for the target's reply, a spawn. Every call is timed; a thrown error, a
// send not answered "ok" or a spawn not "accepted" counts as an error.

// Defaults of LoadOptions.
const (
	DefaultLoadClients  = 16
	DefaultLoadProgress = 5 * time.Second
	loadRequesterFmt    = "agent:main:load:c%d"
	loadCallTimeout     = time.Minute
	loadErrorsKept      = 5
)

// loadMix is one client's round: reads outnumber writes, as an agent's
// tool use does.
var loadMix = []string{
	"sessions_list", "sessions_history", "session_status", "sessions_history", "sessions_send",
	"sessions_list", "sessions_history", "session_status", "sessions_history", "sessions_spawn",
}

// LoadOptions configure a load run.
type LoadOptions struct {
	Duration time.Duration
	Clients  int // concurrent clients (default 16)
	// Server is an external deployment's URL(s), comma-separated, served
	// by its own workers and gateways; Operator must then be its operator
	// (tokens are minted with it). Empty starts servers in this process.
	Server   string
	Operator *bus.Operator
	// Cluster is how many clustered nodes to start in-process (3: the
	// 3-node cluster, every stream and bucket R3); 0 or 1 starts one
	// embedded server.
	Cluster int
	// Sync is the in-process servers' JetStream sync; the zero value
	// flushes every write before acknowledging it, as serve does.
	Sync embedded.Sync
	// Log receives the progress line every Progress (default 5 s) and
	// warnings; nil discards them.
	Log      io.Writer
	Progress time.Duration
	// Calls, when positive, ends each client after that many calls (tests:
	// an exact amount of work instead of a duration).
	Calls int
	// Insecure runs the in-process servers without NATS auth; by default
	// they run with it, as serve does.
	Insecure bool
	// ConnectOptions are every connection's options against Server (its
	// credentials).
	ConnectOptions []nats.Option
}

// LoadTool is one tool's figures over a load run.
type LoadTool struct {
	Tool      string  `json:"tool"`
	Ops       int     `json:"ops"`
	Errors    int     `json:"errors"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50       int64   `json:"p50_ns"`
	P99       int64   `json:"p99_ns"`
}

// LoadReport is a load run's result: what `bench --load --json` prints.
type LoadReport struct {
	Target    string     `json:"target"`
	Sync      string     `json:"sync"`
	Clients   int        `json:"clients"`
	Seconds   float64    `json:"seconds"`
	Ops       int        `json:"ops"`
	Errors    int        `json:"errors"`
	OpsPerSec float64    `json:"ops_per_sec"`
	Tools     []LoadTool `json:"tools"`
	// LoadAverage is the machine's 1, 5 and 15 minute load averages at
	// the end (Linux), to judge how noisy the figures are.
	LoadAverage string `json:"load_average,omitempty"`
	// FirstErrors are the first few errors seen, to say what went wrong.
	FirstErrors []string `json:"first_errors,omitempty"`
	// Quotas says what quotas the workers ran with: the bench's own when
	// it started them, the deployment's (unknown here) with --server.
	Quotas string `json:"quotas,omitempty"`
}

// loadTarget is what the clients talk to, and how to stop what was started.
type loadTarget struct {
	urls     []string // a client i connects to urls[i%len]
	opts     []nats.Option
	quotas   string // what LoadReport.Quotas says
	op       *bus.Operator
	name     string
	sync     string
	stopFunc []func()
}

func (t *loadTarget) stop() {
	for i := len(t.stopFunc) - 1; i >= 0; i-- {
		t.stopFunc[i]()
	}
}

// RunLoad drives the load for o.Duration (less if ctx ends first) and
// reports per tool.
func RunLoad(ctx context.Context, o LoadOptions) (*LoadReport, error) {
	if o.Duration <= 0 {
		return nil, fmt.Errorf("load duration %v: give a positive duration, e.g. 60s", o.Duration)
	}
	if o.Clients <= 0 {
		o.Clients = DefaultLoadClients
	}
	if o.Progress <= 0 {
		o.Progress = DefaultLoadProgress
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	t, err := startLoadTarget(ctx, o)
	if err != nil {
		return nil, err
	}
	defer t.stop()

	clients := make([]*loadClient, o.Clients)
	for i := range clients {
		c, err := newLoadClient(t, i)
		if err != nil {
			for _, c := range clients[:i] {
				c.nc.Close()
			}
			return nil, err
		}
		clients[i] = c
		defer c.nc.Close()
	}
	fmt.Fprintf(o.Log, "load: %s, %d clients, sync %s: seeding one spawned target per client\n", t.name, o.Clients, t.sync)
	for _, c := range clients {
		if err := c.seed(ctx); err != nil {
			return nil, fmt.Errorf("seed client %d: %w", c.i, err)
		}
	}

	var ops, errs atomic.Int64
	rctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.loop(rctx, o.Calls, &ops, &errs) })
	}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(o.Progress)
		defer tick.Stop()
		var last int64
		for {
			select {
			case <-rctx.Done():
				return
			case <-tick.C:
				n := ops.Load()
				fmt.Fprintf(o.Log, "load: %4.0fs/%v  %d calls (%.0f/s now)  %d errors\n",
					time.Since(start).Seconds(), o.Duration, n, float64(n-last)/o.Progress.Seconds(), errs.Load())
				last = n
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	cancel() // the clients may have ended before the duration (Calls)
	<-progressDone
	return loadReport(t, clients, elapsed), nil
}

// startLoadTarget connects to o.Server, or starts a server (or cluster),
// one worker and two gateways in this process.
func startLoadTarget(ctx context.Context, o LoadOptions) (t *loadTarget, err error) {
	if o.Server != "" {
		if o.Operator == nil {
			return nil, errors.New("load against --server needs its operator credentials (--creds)")
		}
		return &loadTarget{urls: strings.Split(o.Server, ","), opts: o.ConnectOptions, op: o.Operator, name: "server " + o.Server, sync: "as the server is configured",
			quotas: "the deployment's own (a client over one gets 429s, counted as errors)"}, nil
	}
	t = &loadTarget{}
	defer func() {
		if err != nil {
			t.stop()
		}
	}()
	dir, err := os.MkdirTemp("", "sessionbus-load-")
	if err != nil {
		return nil, err
	}
	t.stopFunc = append(t.stopFunc, func() { _ = os.RemoveAll(dir) })
	cfg := config.Default()
	cfg.Tools.Sessions.Visibility = "agent"
	cfg.Agents.List = []config.Agent{{ID: "main", Runtime: "script"}}
	cfg.Session.AgentToAgent.MaxPingPongTurns = 0
	// the suites load far more sessions than maintenance's default
	// maxEntries keeps; capping them mid-run would measure the cleanup
	cfg.Session.Maintenance.MaxEntries = 1 << 30
	cfg.Agents.Defaults.Subagents.MaxChildrenPerAgent = 1 << 20
	var d *auth.Deployment
	if !o.Insecure {
		if d, err = auth.LoadOrCreate(filepath.Join(dir, auth.Dir), auth.DefaultAccount); err != nil {
			return nil, err
		}
		// the deployment's own processes and the clients alike: what is
		// measured is the tools' path through an authenticating server
		u, err := d.Mint(auth.DefaultAccount, auth.RoleAdmin, "load", "", 0)
		if err != nil {
			return nil, err
		}
		t.opts = u.Options()
	}
	cfg.Quotas = benchQuotas() // each client loops on its token: checked, never reached
	t.quotas = quotaNote
	if o.Cluster > 1 {
		c, err := embedded.StartLoopbackCluster(dir, "sessionbus-load", o.Cluster, o.Sync, d)
		if err != nil {
			return nil, err
		}
		t.stopFunc = append(t.stopFunc, c.Shutdown)
		t.sync = syncSetting(c.Server(0).JetStreamConfig())
		for i := range o.Cluster {
			t.urls = append(t.urls, c.URL(i))
		}
		cfg.Bus.Replicas = min(o.Cluster, 3)
		t.name = fmt.Sprintf("%d-node in-process cluster (R%d)", o.Cluster, cfg.Bus.Replicas)
	} else {
		srv, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:-1", Name: "load", Sync: o.Sync, Auth: d})
		if err != nil {
			return nil, err
		}
		t.stopFunc = append(t.stopFunc, srv.Shutdown)
		t.sync = syncSetting(srv.NS.JetStreamConfig())
		t.urls = []string{srv.URL()}
		t.name = "one embedded server"
	}
	if t.op, err = bus.NewOperator(); err != nil {
		return nil, err
	}
	// Warnings while the load runs are worth seeing; at the end, stopping
	// the gateways cuts turns short (spawned children still running), and
	// what they log then is no finding.
	level := new(slog.LevelVar)
	level.Set(slog.LevelWarn)
	log := slog.New(slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: level}))
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// the worker on the first node, a gateway on each of the next two
	wnc, err := nats.Connect(t.urls[0], append([]nats.Option{nats.Name("load worker"), nats.MaxReconnects(-1)}, t.opts...)...)
	if err != nil {
		return nil, err
	}
	t.stopFunc = append(t.stopFunc, wnc.Close)
	w, err := handlers.StartWorker(sctx, wnc, cfg, bus.NewVerifier(t.op.PublicKey()), log)
	if err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	t.stopFunc = append(t.stopFunc, w.Stop)
	for i := range 2 {
		id := fmt.Sprintf("load-gw%d", i+1)
		gnc, err := nats.Connect(t.urls[(i+1)%len(t.urls)], append([]nats.Option{nats.Name("load " + id), nats.MaxReconnects(-1)}, t.opts...)...)
		if err != nil {
			return nil, err
		}
		t.stopFunc = append(t.stopFunc, gnc.Close)
		g, err := gateway.Start(sctx, gnc, cfg, t.op, id, log)
		if err != nil {
			return nil, fmt.Errorf("start gateway %s: %w", id, err)
		}
		t.stopFunc = append(t.stopFunc, g.Stop)
	}
	t.stopFunc = append(t.stopFunc, func() { level.Set(slog.LevelError + 1) }) // runs first
	return t, nil
}

// loadClient is one requester session on its own connection.
type loadClient struct {
	i      int
	nc     *nats.Conn
	names  bus.Names
	token  string
	target string // the child it spawned at seeding

	took     map[string][]time.Duration
	errs     map[string]int
	firstErr []string
}

func newLoadClient(t *loadTarget, i int) (*loadClient, error) {
	nc, err := nats.Connect(t.urls[i%len(t.urls)], append([]nats.Option{nats.Name(fmt.Sprintf("load client %d", i)), nats.MaxReconnects(-1)}, t.opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect load client %d to %s: %w", i, t.urls[i%len(t.urls)], err)
	}
	tok, err := t.op.Mint(bus.Caller{SessionKey: fmt.Sprintf(loadRequesterFmt, i)}, 24*time.Hour)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &loadClient{i: i, nc: nc, names: bus.NewNames(""), token: tok,
		took: map[string][]time.Duration{}, errs: map[string]int{}}, nil
}

// seed spawns the client's target session.
func (c *loadClient) seed(ctx context.Context) error {
	out, err := c.call(ctx, "sessions_spawn", map[string]any{"task": "load: seed target"})
	if err != nil {
		return err
	}
	var res struct {
		Status          string `json:"status"`
		ChildSessionKey string `json:"childSessionKey"`
		Error           string `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return err
	}
	if res.Status != "accepted" || res.ChildSessionKey == "" {
		return fmt.Errorf("spawn not accepted: %s %s", res.Status, res.Error)
	}
	c.target = res.ChildSessionKey
	return nil
}

func (c *loadClient) call(ctx context.Context, tool string, params map[string]any) ([]byte, error) {
	body, _ := json.Marshal(params)
	cctx, cancel := context.WithTimeout(ctx, loadCallTimeout)
	defer cancel()
	return bus.Call(cctx, c.nc, c.names, c.token, tool, body)
}

// loop runs the mix until ctx ends, or for calls calls when positive; a
// call cut short by the end is not counted.
func (c *loadClient) loop(ctx context.Context, calls int, ops, errs *atomic.Int64) {
	for n := c.i; calls <= 0 || n < c.i+calls; n++ { // clients start at different points of the mix
		tool := loadMix[n%len(loadMix)]
		params := map[string]any{"sessionKey": c.target}
		switch tool {
		case "sessions_list":
			params = map[string]any{"limit": 20}
		case "sessions_history":
			params["limit"] = 20
		case "sessions_send":
			params["message"], params["timeoutSeconds"] = "ping", 30
		case "sessions_spawn":
			params = map[string]any{"task": "load: summarize"}
		}
		start := time.Now()
		out, err := c.call(ctx, tool, params)
		took := time.Since(start)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = checkLoadReply(tool, out)
		}
		ops.Add(1)
		c.took[tool] = append(c.took[tool], took)
		if err != nil {
			errs.Add(1)
			c.errs[tool]++
			if len(c.firstErr) < loadErrorsKept {
				c.firstErr = append(c.firstErr, tool+": "+err.Error())
			}
		}
	}
}

// checkLoadReply refuses a send that did not complete and a spawn that was
// not accepted.
func checkLoadReply(tool string, out []byte) error {
	want := map[string]string{"sessions_send": "ok", "sessions_spawn": "accepted"}[tool]
	if want == "" {
		return nil
	}
	var res struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return err
	}
	if res.Status != want {
		return fmt.Errorf("status %q, want %q: %s", res.Status, want, res.Error)
	}
	return nil
}

func loadReport(t *loadTarget, clients []*loadClient, elapsed time.Duration) *LoadReport {
	r := &LoadReport{Target: t.name, Sync: t.sync, Clients: len(clients), Seconds: round(elapsed.Seconds(), 1), LoadAverage: loadAverage(), Quotas: t.quotas}
	tools := slices.Clone(loadMix)
	slices.Sort(tools)
	for _, tool := range slices.Compact(tools) {
		var all []time.Duration
		lt := LoadTool{Tool: tool}
		for _, c := range clients {
			all = append(all, c.took[tool]...)
			lt.Errors += c.errs[tool]
		}
		slices.Sort(all)
		lt.Ops = len(all)
		lt.OpsPerSec = round(float64(lt.Ops)/elapsed.Seconds(), 1)
		lt.P50, lt.P99 = int64(percentile(all, 0.50)), int64(percentile(all, 0.99))
		r.Tools = append(r.Tools, lt)
		r.Ops += lt.Ops
		r.Errors += lt.Errors
	}
	r.OpsPerSec = round(float64(r.Ops)/elapsed.Seconds(), 1)
	for _, c := range clients {
		r.FirstErrors = append(r.FirstErrors, c.firstErr...)
	}
	if len(r.FirstErrors) > loadErrorsKept {
		r.FirstErrors = r.FirstErrors[:loadErrorsKept]
	}
	return r
}

// loadAverage is /proc/loadavg's three averages, "" where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// WriteTable prints the report for people.
func (r *LoadReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "load: %s, %d clients, %.1fs, sync %s, load average %s\n", r.Target, r.Clients, r.Seconds, r.Sync, r.LoadAverage)
	if r.Quotas != "" {
		fmt.Fprintf(w, "quotas: %s\n", r.Quotas)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tool\tcalls\tcalls/s\tp50\tp99\tp99/p50\terrors\t")
	for _, t := range r.Tools {
		ratio := 0.0
		if t.P50 > 0 {
			ratio = float64(t.P99) / float64(t.P50)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%v\t%v\t%.1f\t%d\t\n", t.Tool, t.Ops, t.OpsPerSec,
			time.Duration(t.P50).Round(time.Microsecond), time.Duration(t.P99).Round(time.Microsecond), ratio, t.Errors)
	}
	fmt.Fprintf(tw, "total\t%d\t%.1f\t\t\t\t%d\t\n", r.Ops, r.OpsPerSec, r.Errors)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range r.FirstErrors {
		fmt.Fprintln(w, "error:", e)
	}
	return nil
}

// WriteJSON prints the report as one JSON object.
func (r *LoadReport) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
