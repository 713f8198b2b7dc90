package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/runtime/confine"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/ops/console"
	"github.com/sessionbus/sessionbus/ops/demo"
)

// serveFlags is serve's command line.
type serveFlags struct {
	data, listen, cfgPath, logLevel, metricsAddr string
	console                                      string // web console address, "" none
	noGateway, demo, auth, fresh                 bool
	nodes, node                                  int
	sync                                         embedded.Sync
	grace                                        time.Duration
	tls                                          *embedded.TLS // nil: no TLS
}

func cmdServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f, code := parseServeFlags(args, stderr)
	if code != 0 {
		return code
	}
	if f.nodes > 0 {
		return f.cluster(stdout, stderr)
	}
	return f.serve(stdout, stderr)
}

// parseServeFlags reads serve's command line; a code other than 0 is the
// exit status for a command line that is wrong (already explained on
// stderr).
func parseServeFlags(args []string, stderr io.Writer) (serveFlags, int) {
	fs := newFlags("serve", stderr)
	data := fs.String("data", defaultData(), "data dir (JetStream store, operator credentials)")
	listen := fs.String("listen", "127.0.0.1:4222", "client listen address host:port")
	cfgPath := fs.String("config", "", "config file (default: ./sessionbus.yaml or .json if present)")
	noGateway := fs.Bool("no-gateway", false, "run no gateway in this process (replicas run elsewhere)")
	runDemo := fs.Bool("demo", false, "add sample sessions, run a scenario against the tools, print commands to try")
	fresh := fs.Bool("fresh", false, "with --demo: remove the data dir's sessions first (a sessionbus data dir only; keys and credentials stay), so the demo starts from empty")
	syncFlag := syncFlags(fs)
	insecure := fs.Bool("insecure", false, "run without NATS auth: any local process may connect and read or change every session (loopback only); by default every connection needs a role's credentials, written to DATA/creds (docs/security.md)")
	_ = fs.Bool("auth", true, "accepted for older scripts: auth is on unless --insecure")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := metricsFlag(fs)
	grace := shutdownGraceFlag(fs)
	tlsFlags := serveTLSFlags(fs)
	consoleAddr := fs.String("console", "", "also serve the web console on this address (host:port, e.g. 127.0.0.1:4280); --demo turns it on at "+console.DefaultListen)
	nodes := fs.Int("cluster", 0, "run N clustered nodes in this process (odd, 3+; client ports from --listen up, routes 2000 above, streams R3): see docs/ops.md#cluster")
	node := fs.Int("node", 0, "with --cluster N: run only node I (1..N) of the cluster, and no worker or gateway; the other nodes, workers and gateways are processes of their own (sessionbus up, examples/deploy/): see docs/ops.md#up")
	if err := fs.Parse(args); err != nil {
		return serveFlags{}, 2
	}
	if *node != 0 && *nodes == 0 {
		fmt.Fprintln(stderr, "sessionbus serve: --node goes with --cluster N (it runs one node of that cluster)")
		return serveFlags{}, 2
	}
	if !checkShutdownGrace("serve", *grace, stderr) {
		return serveFlags{}, 2
	}
	if *fresh && !*runDemo {
		fmt.Fprintln(stderr, "sessionbus serve: --fresh goes with --demo (it starts the demo from empty); a serve without --demo never removes sessions")
		return serveFlags{}, 2
	}
	if *consoleAddr != "" && *nodes > 0 {
		fmt.Fprintln(stderr, "sessionbus serve: --console runs with one node: start `sessionbus console --server URL` beside the cluster instead")
		return serveFlags{}, 2
	}
	if *consoleAddr != "" && *insecure && !console.IsLoopback(*consoleAddr) {
		fmt.Fprintln(stderr, "sessionbus serve:", console.ErrNotLoopback)
		return serveFlags{}, 2
	}
	syncMode, err := syncFlag()
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus serve:", err)
		return serveFlags{}, 2
	}
	tlsOpts, err := tlsFlags()
	if err == nil && tlsOpts != nil && *runDemo {
		err = fmt.Errorf("--demo prints commands for a server without TLS: drop --tls-cert or --demo")
	}
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus serve:", err)
		return serveFlags{}, 2
	}
	return serveFlags{
		data: *data, listen: *listen, cfgPath: *cfgPath, logLevel: *logLevel, metricsAddr: *metricsAddr,
		noGateway: *noGateway, demo: *runDemo, auth: !*insecure, fresh: *fresh, nodes: *nodes, node: *node, sync: syncMode, grace: *grace,
		tls: tlsOpts, console: *consoleAddr,
	}, 0
}

// cluster runs serve --cluster: f.nodes clustered nodes in this process.
func (f serveFlags) cluster(stdout, stderr io.Writer) int {
	if err := checkListen(f.listen, f.auth); err != nil {
		_ = failLine(stderr, "serve", err)
		return 2
	}
	return serveCluster(clusterServe{nodes: f.nodes, data: f.data, listen: f.listen, cfgPath: f.cfgPath, logLevel: f.logLevel, noGateway: f.noGateway, demo: f.demo, auth: f.auth, node: f.node, sync: f.sync, grace: f.grace, tls: f.tls}, stdout, stderr)
}

// serve runs one embedded server with the tool workers and, unless
// --no-gateway, a gateway, until SIGINT or SIGTERM.
func (f serveFlags) serve(stdout, stderr io.Writer) int {
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("serve", f.cfgPath, f.logLevel, stderr)
	if err != nil {
		return 1
	}
	if err := checkListen(f.listen, f.auth); err != nil {
		_ = failLine(stderr, "serve", err)
		return 2
	}
	if f.auth {
		warnCleartext(log, f.listen, f.tls != nil)
	}
	var dd demo.DataDir
	if f.demo {
		demo.Configure(cfg)
		// the demo's streaming model, which its writer agent's turns call
		model, err := demo.StartModel(0)
		if err != nil {
			_ = failLine(stderr, "serve", err)
			return 1
		}
		defer model.Close()
		demo.AddStreamingAgent(cfg, model)
		if dd, err = demo.PrepareDataDir(f.data, f.fresh); err != nil {
			_ = failLine(stderr, "serve", err)
			return 1
		}
	}
	srv, deployment, err := f.startServer(dd.Reset)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	if err := f.settleDataDir(dd, log); err != nil {
		srv.Shutdown()
		_ = failLine(stderr, "serve", err)
		return 1
	}
	log.Info("JetStream sync", "sync", f.sync.String(), "meaning", f.sync.Describe())
	defer srv.Shutdown()
	op, err := bus.LoadOrCreateOperator(f.data)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	nc, err := f.connect(srv, deployment, cfg, op, log)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	defer closeConn(nc)
	if err := writeClientConfig(f.data, srv.URL(), "serve", f.auth); err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	pm, err := startMetrics(f.metricsAddr, nc, cfg, log)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	defer pm.close()
	w, err := startWorker(nc, cfg, op.PublicKey(), log, pm.worker()...)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	// Drain first: the worker stops taking requests and lets the ones in
	// flight finish while this gateway still runs their turns; only then
	// does the gateway stop (a nil one does nothing).
	var gw *gateway.Gateway
	defer func() {
		w.Shutdown(f.grace)
		gw.Stop()
	}()
	if !f.noGateway {
		runCreds, err := runCredentials(srv.UpdateAccount, deployment, cfg.Bus.Prefix)
		if err != nil {
			_ = failLine(stderr, "serve", err)
			return 1
		}
		// exec agents run as this process's user: keep them from its
		// environment and from the data dir
		confine.Harden(log, f.data)
		if gw, err = startGateway(nc, cfg, op, log, gateway.Options{Observer: pm.gateway(), RunCredentials: runCreds}); err != nil {
			fmt.Fprintln(stderr, "sessionbus serve:", err)
			return 1
		}
	}
	// the transcript search: a failure leaves serve running without it
	defer startIndexerBehind(nc, cfg, indexerFile(f.data), dd.Reset, cfg.Search.IncludeTools, log)()
	fmt.Fprintln(stdout, "ready", srv.URL())
	if c, err := f.startConsole(nc, op, deployment, cfg.Bus.Prefix, w, pm, log, stderr); err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	} else if c != nil {
		defer c.Close()
	}
	if f.demo {
		if err := f.runDemo(nc, op, w, srv.URL(), dd, stdout); err != nil {
			fmt.Fprintln(stderr, "sessionbus serve --demo:", err)
			return 1
		}
	}
	<-sigs
	log.Info("shutting down", "grace", f.grace)
	return 0
}

// startConsole starts the web console when --console or --demo asks for
// it. The demo's is a convenience: a taken port is a warning, not a stop.
func (f serveFlags) startConsole(nc *nats.Conn, op *bus.Operator, d *auth.Deployment, prefix string, w *handlers.Worker, pm *procMetrics, log *slog.Logger, stderr io.Writer) (*console.Server, error) {
	addr := f.console
	if addr == "" && f.demo {
		addr = console.DefaultListen
	}
	if addr == "" {
		return nil, nil
	}
	account := ""
	if d != nil {
		account = d.AccountKey(auth.DefaultAccount)
	}
	o := console.Options{Conn: nc, Operator: op, Names: bus.NewNames(prefix), Listen: addr, Auth: f.auth, Account: account, Log: log}
	if w != nil {
		o.Redactor = w.Deps.Redactor // previews masked as this deployment's history is
		o.AgentModel = w.Deps.Config.AgentModel
		o.Price = func(m string) config.ModelCost { return w.Deps.Config.ModelLimits(m).Cost }
	}
	if pm != nil && pm.srv != nil {
		o.MetricsFrom = []string{pm.srv.Addr()} // this process's worker and gateway
	}
	c, err := startConsole(o)
	if err != nil && f.console == "" {
		log.Warn("the demo's web console did not start; start it on another port with `sessionbus console --listen ADDR`", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	how := "log in with the admin's credentials: paste " + f.data + "/creds/admin.creds (or ops.creds to look only)"
	if !f.auth {
		how = "no login: the bus runs without auth, so the console is loopback only"
	}
	if f.demo && f.auth {
		// the demo signs its user in: a one-time link instead of a paste
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		link, err := c.SignInLink(ctx, console.RoleAdmin, console.DefaultLinkTTL)
		cancel()
		if err == nil {
			how = "sign in as admin with " + link + " (once, within " + console.DefaultLinkTTL.String() + "; `sessionbus console --open` makes more), or " + how
		}
	}
	fmt.Fprintf(stderr, "console: %s (%s)\n", c.URL(), how)
	return c, nil
}

// startServer starts the embedded nats-server, with NATS-level auth unless
// --insecure (its deployment is returned, else nil).
func (f serveFlags) startServer(resetStore bool) (*embedded.Server, *auth.Deployment, error) {
	eopts := embedded.Options{DataDir: f.data, Listen: f.listen, Sync: f.sync, TLS: f.tls, ResetStore: resetStore}
	if f.auth {
		var err error
		if eopts.Auth, err = loadDeployment(f.data); err != nil {
			return nil, nil, err
		}
	}
	srv, err := embedded.Start(eopts)
	if err != nil {
		return nil, nil, err
	}
	return srv, eopts.Auth, nil
}

// connect opens this process's own connection to srv: with the
// credentials serveAuth writes for it, or under --insecure none.
func (f serveFlags) connect(srv *embedded.Server, deployment *auth.Deployment, cfg *config.Config, op *bus.Operator, log *slog.Logger) (*nats.Conn, error) {
	self, err := selfOptions(deployment, f.data, f.listen, cfg.Bus.Prefix, op, log)
	if err != nil {
		return nil, err
	}
	return srv.Connect("sessionbus serve", append([]nats.Option{nats.MaxReconnects(-1)}, self...)...)
}

// startGateway gives the gateway's start a bounded time, like startWorker.
func startGateway(nc *nats.Conn, cfg *config.Config, op *bus.Operator, log *slog.Logger, o gateway.Options) (*gateway.Gateway, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return gateway.StartWithOptions(ctx, nc, cfg, op, "serve", log, o)
}

// runDemo runs the --demo scenario against the tools.
func (f serveFlags) runDemo(nc *nats.Conn, op *bus.Operator, w *handlers.Worker, url string, dd demo.DataDir, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return demo.Run(ctx, demo.Options{Conn: nc, Operator: op, Deps: w.Deps, DataDir: f.data, URL: url, Out: stdout, Auth: f.auth, Start: dd, Cmd: selfCommand(),
		Home: sameDir(f.data, defaultData())})
}

func cmdWorker(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("worker", stderr)
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "operator credentials (the worker trusts tokens they sign)")
	issuer := fs.String("issuer", "", "operator public key to trust instead of reading --creds")
	cfgPath := fs.String("config", "", "config file (default: ./sessionbus.yaml or .json if present)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := metricsFlag(fs)
	grace := shutdownGraceFlag(fs)
	tf := addWorkerTenantsFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !checkShutdownGrace("worker", *grace, stderr) {
		return 2
	}
	if *tf.dir != "" {
		return workerTenants(fs, tf, server, *cfgPath, *logLevel, *grace, stdout, stderr)
	}
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("worker", *cfgPath, *logLevel, stderr)
	if err != nil {
		return 1
	}
	if err := checkProcessRole("worker", *creds); err != nil {
		_ = failLine(stderr, "worker", err)
		return 1
	}
	pub := *issuer
	if pub == "" {
		if pub, err = loadIssuer(*creds); err != nil {
			fmt.Fprintln(stderr, "sessionbus worker:", err)
			return 1
		}
	}
	nc, err := server.connect("sessionbus worker", credsOptions(*creds)...)
	if err != nil {
		_ = failLine(stderr, "worker", err)
		return 1
	}
	defer closeConn(nc)
	pm, err := startMetrics(*metricsAddr, nc, cfg, log)
	if err != nil {
		_ = failLine(stderr, "worker", err)
		return 1
	}
	defer pm.close()
	w, err := startWorker(nc, cfg, pub, log, pm.worker()...)
	if err != nil {
		_ = failLine(stderr, "worker", err)
		return 1
	}
	defer w.Shutdown(*grace)
	fmt.Fprintln(stdout, "ready", *server.url)
	<-sigs
	log.Info("shutting down", "grace", *grace)
	return 0
}

// startWorker gives stream and bucket creation a bounded time: on a cluster
// still electing leaders it fails with a clear error instead of hanging.
func startWorker(nc *nats.Conn, cfg *config.Config, issuer string, log *slog.Logger, opts ...handlers.WorkerOption) (*handlers.Worker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return handlers.StartWorker(ctx, nc, cfg, bus.NewVerifier(issuer), log, opts...)
}
