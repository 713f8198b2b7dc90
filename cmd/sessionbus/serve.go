package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
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
	syncAlways := fs.Bool("sync-always", false, "fsync every JetStream write (slower, survives power loss)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := metricsFlag(fs)
	grace := shutdownGraceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !checkShutdownGrace("serve", *grace, stderr) {
		return 2
	}
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("serve", *cfgPath, *logLevel, stderr)
	if err != nil {
		return 1
	}
	if *runDemo {
		demo.Configure(cfg)
	}
	srv, err := embedded.Start(embedded.Options{DataDir: *data, Listen: *listen, SyncAlways: *syncAlways})
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	defer srv.Shutdown()
	op, err := bus.LoadOrCreateOperator(*data)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	nc, err := srv.Connect("sessionbus serve", nats.MaxReconnects(-1))
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
		err := demo.Run(dctx, demo.Options{Conn: nc, Operator: op, Deps: w.Deps, DataDir: *data, URL: srv.URL(), Out: stdout})
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
		op, err := bus.LoadOperator(*creds)
		if err != nil {
			fmt.Fprintln(stderr, "sessionbus worker:", err)
			return 1
		}
		pub = op.PublicKey()
	}
	nc, err := connect(*server, "sessionbus worker")
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
