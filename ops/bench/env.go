package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// sizes scale the data sets and iteration counts; quick is for tests.
type sizes struct {
	list10k, list100k  int  // sessions in the bucket for list_10k / list_100k
	list1m             int  // sessions for the *_1m rows
	cold               plan // worker_cold_start_1m, raw_kv_watch_1m: whole loads of the bucket
	interSessions      int  // sessions writing the interleaved stream round-robin
	interPerSession    int  // entries per interleaved session
	singleN            int  // entries of the single big session
	fast, mid          plan // one round trip; one pipelined wave
	list, tr, hist, sn plan
	send               plan // send_wait (sequential)
	sendTput           plan // send_throughput_*: totals over all 32 senders
}

func fullSizes() sizes {
	return sizes{
		list10k: 10_000, list100k: 100_000, list1m: 1_000_000,
		cold:          plan{warm: 1, ops: 3},
		interSessions: 10_000, interPerSession: 100,
		singleN:  1_000_000,
		fast:     plan{warm: 1000, ops: 20_000},
		mid:      plan{warm: 300, ops: 5000},
		list:     plan{warm: 200, ops: 3000},
		tr:       plan{warm: 300, ops: 5000},
		hist:     plan{warm: 200, ops: 3000},
		sn:       plan{warm: 20, ops: 500},
		send:     plan{warm: 100, ops: 1000},
		sendTput: plan{warm: 320, ops: 3200},
	}
}

func quickSizes() sizes {
	p := plan{warm: 5, ops: 30}
	return sizes{
		list10k: 300, list100k: 600, list1m: 1500,
		cold:          plan{warm: 1, ops: 2},
		interSessions: 40, interPerSession: 100,
		singleN: 2000,
		fast:    p, mid: p, list: p, tr: p, hist: p,
		sn:       plan{warm: 2, ops: 10},
		send:     p,
		sendTput: plan{warm: 32, ops: 128},
	}
}

// Keys (session keys as the tools see them; the transcript subjects use
// their bus.EncodeKey form).
const (
	requesterKey  = "agent:main:main"
	singleKey     = "agent:main:bench:single"
	hist100Key    = "agent:main:bench:h100"
	hist100Len    = 100
	page          = 50
	interKeyFmt   = "agent:main:bench:s%d"
	rawEchoSubj   = "bench.raw.echo"
	rawStream     = "BENCH_RAW"
	rawStreamSubj = "bench.raw.js.>"
	rawBucket     = "bench_raw_kv"
)

// env is one run's server, worker, clients and shared loads.
type env struct {
	o     Options
	sz    sizes
	log   io.Writer
	dir   string
	srv   *embedded.Server
	auth  *auth.Deployment // nil with Options.Insecure
	sync  string
	names bus.Names
	cfg   *config.Config

	op    *bus.Operator
	token string

	workerNC *nats.Conn
	worker   *handlers.Worker
	wlog     *slog.Logger // the worker's (warnings go to Options.Log)

	nc *nats.Conn // the bench client (requests, transcript reads, loads)
	js jetstream.JetStream
	tr *transcripts.Store

	loads []Load

	// shared loads, done at most once per run
	sessions   int   // session entries loaded for the list benchmarks
	loadNow    int64 // the inventory's clock (unix ms): every load of it spreads updatedAt back from here
	inter      *interleaved
	singleDone bool
	histDone   map[string]bool

	sendTargets int                // spawned target sessions created for send_*
	sendTput1gw map[string]float64 // ops_per_sec of the 1-gateway send throughput, by delay
}

func newEnv(ctx context.Context, o Options) (e *env, err error) {
	e = &env{o: o, sz: fullSizes(), log: o.Log, histDone: map[string]bool{}, sendTput1gw: map[string]float64{}, loadNow: time.Now().UnixMilli()}
	if o.Quick {
		e.sz = quickSizes()
	}
	if e.log == nil {
		e.log = io.Discard
	}
	defer func() {
		if err != nil {
			e.close()
			e = nil
		}
	}()
	if e.dir, err = os.MkdirTemp("", "sessionbus-bench-"); err != nil {
		return nil, err
	}
	if e.auth, err = e.startAuth(); err != nil {
		return nil, err
	}
	if e.srv, err = embedded.Start(embedded.Options{DataDir: e.dir, Listen: "127.0.0.1:-1", Name: "bench", Auth: e.auth, Sync: o.Sync}); err != nil {
		return nil, err
	}
	e.sync = syncSetting(e.srv.NS.JetStreamConfig())
	e.cfg = config.Default()
	// agent visibility: a list of 100 rows comes from the whole inventory,
	// not from the requester's (empty) spawn tree.
	e.cfg.Tools.Sessions.Visibility = "agent"
	// send_*: agent main runs the script runtime (no rules: echo; the
	// gateways of the delay variants add a rule), and no ping-pong turns.
	e.cfg.Agents.List = []config.Agent{{ID: "main", Runtime: "script"}, steerBenchAgent("http://127.0.0.1:9/v1")}
	e.cfg.Session.AgentToAgent.MaxPingPongTurns = 0
	// the suites load far more sessions than maintenance's default
	// maxEntries keeps; capping them mid-run would measure the cleanup
	e.cfg.Session.Maintenance.MaxEntries = 1 << 30
	// spawn_accept: its requesters keep every child active (no gateway
	// runs them), so the fan-out limit is lifted rather than measured.
	e.cfg.Agents.Defaults.Subagents.MaxChildrenPerAgent = 1 << 20
	// the benchmarks call in tight loops with one token: quotas that are
	// checked but never reached
	e.cfg.Quotas = benchQuotas()
	// inbound_routed gives each peer a session of its own (the other
	// benchmarks name their sessions)
	e.cfg.Session.DMScope = "per-channel-peer"
	e.names = bus.NewNames(e.cfg.Bus.Prefix)
	if e.op, err = bus.NewOperator(); err != nil {
		return nil, err
	}
	if e.token, err = e.op.Mint(bus.Caller{SessionKey: requesterKey}, 24*time.Hour); err != nil {
		return nil, err
	}
	// The worker has its own connection.
	if e.workerNC, err = e.connectInternal("bench worker"); err != nil {
		return nil, err
	}
	e.wlog = slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if e.worker, err = handlers.StartWorker(sctx, e.workerNC, e.cfg, bus.NewVerifier(e.op.PublicKey()), e.wlog); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	if e.nc, err = e.connectClient("bench client"); err != nil {
		return nil, err
	}
	if e.js, err = jetstream.New(e.nc); err != nil {
		return nil, err
	}
	if e.tr, err = transcripts.Open(sctx, e.nc, e.js, e.names); err != nil {
		return nil, err
	}
	return e, nil
}

// syncSetting describes when the file store fsyncs.
func syncSetting(c *server.JetStreamConfig) string {
	if c == nil {
		return "unknown"
	}
	if c.SyncAlways {
		return "always (fsync every write)"
	}
	if c.SyncInterval <= 0 || c.SyncInterval == 2*time.Minute {
		return "lazy (fsync every 2m0s)" // nats-server's default sync_interval (--sync 2m)
	}
	return fmt.Sprintf("lazy (fsync every %v)", c.SyncInterval)
}

func (e *env) serverVersion() string {
	if e.srv == nil {
		return ""
	}
	return server.VERSION
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.log, format+"\n", args...)
}

// timed runs a load and records it.
func (e *env) timed(name string, items int, f func() error) error {
	e.logf("load: %s ...", name)
	start := time.Now()
	if err := f(); err != nil {
		return fmt.Errorf("load %s: %w", name, err)
	}
	d := time.Since(start)
	e.loads = append(e.loads, Load{Name: name, Items: items, Seconds: round(d.Seconds(), 3)})
	e.logf("load: %s: %d in %v", name, items, d.Round(time.Millisecond))
	return nil
}

func (e *env) close() {
	if e.tr != nil {
		e.tr.Close()
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.worker != nil {
		e.worker.Stop()
	}
	if e.workerNC != nil {
		e.workerNC.Close()
	}
	if e.srv != nil {
		e.srv.Shutdown()
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// opCtx bounds one benchmark's operations (request APIs need a deadline).
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Minute)
}

func f64(v float64) *float64 { return &v }

// connectInternal connects a worker or gateway: in-process, as `serve`
// runs them, or over TCP loopback with Options.TCP.
func (e *env) connectInternal(name string) (*nats.Conn, error) {
	role := auth.RoleGateway
	if strings.Contains(name, "worker") {
		role = auth.RoleWorker
	}
	opts, err := e.authOpts(role, name)
	if err != nil {
		return nil, err
	}
	if e.o.TCP {
		return nats.Connect(e.srv.URL(), append(opts, nats.Name(name))...)
	}
	return e.srv.Connect(name, opts...)
}

// connectClient connects the bench client or a raw responder over TCP.
func (e *env) connectClient(name string) (*nats.Conn, error) {
	opts, err := e.authOpts(auth.RoleAdmin, name)
	if err != nil {
		return nil, err
	}
	return nats.Connect(e.srv.URL(), append(opts, nats.Name(name))...)
}
