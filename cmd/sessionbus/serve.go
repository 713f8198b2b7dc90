package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/demo"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
)

func cmdServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("serve", stderr)
	data := fs.String("data", defaultData, "data dir (JetStream store, operator credentials)")
	listen := fs.String("listen", "127.0.0.1:4222", "client listen address host:port")
	cfgPath := fs.String("config", "", "config file (default: ./sessionbus.yaml or .json if present)")
	noGateway := fs.Bool("no-gateway", false, "run no gateway in this process (replicas run elsewhere)")
	runDemo := fs.Bool("demo", false, "add sample sessions, run a scenario against the tools, print commands to try")
	syncFlag := syncFlags(fs)
	authOn := fs.Bool("auth", false, "NATS-level auth: every connection needs a role's credentials (written to DATA/creds); see docs/security.md")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := metricsFlag(fs)
	grace := shutdownGraceFlag(fs)
	nodes := fs.Int("cluster", 0, "run N clustered nodes in this process (odd, 3+; client ports from --listen up, routes 2000 above, streams R3): see docs/ops.md#cluster")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !checkShutdownGrace("serve", *grace, stderr) {
		return 2
	}
	syncMode, err := syncFlag()
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus serve:", err)
		return 2
	}
	if *nodes > 0 {
		if *authOn {
			_ = failLine(stderr, "serve", fmt.Errorf("--cluster does not take --auth yet: run the cluster without it on loopback, or a real cluster with the config of docs/security.md"))
			return 2
		}
		if err := checkListen(*listen, false); err != nil {
			_ = failLine(stderr, "serve", err)
			return 2
		}
		return serveCluster(clusterServe{nodes: *nodes, data: *data, listen: *listen, cfgPath: *cfgPath, logLevel: *logLevel, noGateway: *noGateway, demo: *runDemo, sync: syncMode, grace: *grace}, stdout, stderr)
	}
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("serve", *cfgPath, *logLevel, stderr)
	if err != nil {
		return 1
	}
	if err := checkListen(*listen, *authOn); err != nil {
		_ = failLine(stderr, "serve", err)
		return 2
	}
	if *runDemo {
		demo.Configure(cfg)
	}
	eopts := embedded.Options{DataDir: *data, Listen: *listen, Sync: syncMode}
	if *authOn {
		if eopts.Auth, err = auth.LoadOrCreate(filepath.Join(*data, auth.Dir), auth.DefaultAccount); err != nil {
			_ = failLine(stderr, "serve", err)
			return 1
		}
	}
	srv, err := embedded.Start(eopts)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	log.Info("JetStream sync", "sync", syncMode.String(), "meaning", syncMode.Describe())
	defer srv.Shutdown()
	op, err := bus.LoadOrCreateOperator(*data)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	connOpts := []nats.Option{nats.MaxReconnects(-1)}
	if *authOn {
		// written only once this serve holds the data dir
		self, err := serveAuth(eopts.Auth, *data, cfg.Bus.Prefix, op, log)
		if err != nil {
			_ = failLine(stderr, "serve", err)
			return 1
		}
		connOpts = append(connOpts, self...)
	} else {
		log.Warn("NATS auth is off: any client that reaches the server can read and change every session; run serve --auth to require credentials", "listen", *listen)
	}
	nc, err := srv.Connect("sessionbus serve", connOpts...)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	defer closeConn(nc)
	pm, err := startMetrics(*metricsAddr, nc, cfg, log)
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
		w.Shutdown(*grace)
		gw.Stop()
	}()
	if !*noGateway {
		gctx, gcancel := context.WithTimeout(context.Background(), 60*time.Second)
		gw, err = gateway.StartWithOptions(gctx, nc, cfg, op, "serve", log, gateway.Options{Observer: pm.gateway()})
		gcancel()
		if err != nil {
			fmt.Fprintln(stderr, "sessionbus serve:", err)
			return 1
		}
	}
	fmt.Fprintln(stdout, "ready", srv.URL())
	if *runDemo {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := demo.Run(dctx, demo.Options{Conn: nc, Operator: op, Deps: w.Deps, DataDir: *data, URL: srv.URL(), Out: stdout, Auth: *authOn})
		dcancel()
		if err != nil {
			fmt.Fprintln(stderr, "sessionbus serve --demo:", err)
			return 1
		}
	}
	<-sigs
	log.Info("shutting down", "grace", *grace)
	return 0
}

func cmdWorker(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("worker", stderr)
	server := fs.String("server", envOr("SESSIONBUS_SERVER", defaultServer), "NATS server URL")
	creds := fs.String("creds", defaultCreds(), "operator credentials (the worker trusts tokens they sign)")
	issuer := fs.String("issuer", "", "operator public key to trust instead of reading --creds")
	cfgPath := fs.String("config", "", "config file (default: ./sessionbus.yaml or .json if present)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := metricsFlag(fs)
	grace := shutdownGraceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !checkShutdownGrace("worker", *grace, stderr) {
		return 2
	}
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("worker", *cfgPath, *logLevel, stderr)
	if err != nil {
		return 1
	}
	pub := *issuer
	if pub == "" {
		if pub, err = loadIssuer(*creds); err != nil {
			fmt.Fprintln(stderr, "sessionbus worker:", err)
			return 1
		}
	}
	nc, err := connect(*server, "sessionbus worker", credsOptions(*creds)...)
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
	fmt.Fprintln(stdout, "ready", *server)
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
