package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/runtime/confine"
)

// cmdGateway runs one gateway replica against an existing NATS server: it
// pulls run requests from the shared consumer and executes agent turns.
func cmdGateway(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("gateway", stderr)
	server := newServerFlags(fs)
	host, _ := os.Hostname()
	id := fs.String("id", envOr("SESSIONBUS_GATEWAY_ID", fmt.Sprintf("gw-%s-%d", host, os.Getpid())), "gateway name (recorded on the runs it executes)")
	creds := fs.String("creds", defaultCreds(), "operator credentials (the gateway mints run tokens with them)")
	cfgPath := fs.String("config", "", "config file (default: ./sessionbus.yaml or .json if present)")
	concurrency := fs.Int("concurrency", gateway.DefaultConcurrency, "concurrent runs")
	ackWait := fs.Duration("ack-wait", gateway.DefaultAckWait, "how long a run whose gateway died waits before another replica takes it (applies when the first gateway creates the shared consumer)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := metricsFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *ackWait < time.Second {
		_ = failLine(stderr, "gateway", fmt.Errorf("--ack-wait %v is too short: use 1s or more (a heartbeat every third of it keeps a long run)", *ackWait))
		return 2
	}
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("gateway", *cfgPath, *logLevel, stderr)
	if err != nil {
		return 1
	}
	if err := checkProcessRole("gateway", *creds); err != nil {
		_ = failLine(stderr, "gateway", err)
		return 1
	}
	op, err := bus.LoadOperator(*creds)
	if err != nil {
		_ = failLine(stderr, "gateway", err)
		return 1
	}
	nc, err := server.connect("sessionbus gateway "+*id, credsOptions(*creds)...)
	if err != nil {
		_ = failLine(stderr, "gateway", err)
		return 1
	}
	defer closeConn(nc)
	pm, err := startMetrics(*metricsAddr, nc, cfg, log)
	if err != nil {
		_ = failLine(stderr, "gateway", err)
		return 1
	}
	defer pm.close()
	// exec agents run as this process's user: keep them from its
	// environment and from the credentials it runs with
	confine.Harden(log, *creds)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	g, err := gateway.StartWithOptions(ctx, nc, cfg, op, *id, log, gateway.Options{Concurrency: *concurrency, AckWait: *ackWait, Observer: pm.gateway()})
	cancel()
	if err != nil {
		_ = failLine(stderr, "gateway", err)
		return 1
	}
	defer g.Stop()
	fmt.Fprintln(stdout, "ready", *id)
	<-sigs
	// Stop hands the turns it interrupts back to the queue, so another
	// replica (or this one, restarted) runs them and their callers still
	// get the outcome.
	log.Info("shutting down")
	return 0
}
