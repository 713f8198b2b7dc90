package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/ops/bench"
)

// loadFlagSet is bench's --load mode.
type loadFlagSet struct {
	duration *time.Duration
	clients  *int
	cluster  *int
	server   *string
	creds    *string
	tls      *clientTLS
}

func loadFlags(fs *flag.FlagSet) loadFlagSet {
	return loadFlagSet{
		duration: fs.Duration("load", 0, "instead of the suite: drive mixed tool traffic (list, history, status, send, spawn) for this long, e.g. 60s, and print calls/s, p50 and p99 per tool and errors"),
		clients:  fs.Int("load-clients", bench.DefaultLoadClients, "with --load: concurrent clients"),
		cluster:  fs.Int("load-cluster", 0, "with --load: start this many clustered nodes in-process (3: the 3-node cluster, streams and buckets R3) instead of one embedded server"),
		server:   fs.String("server", "", "with --load: an external deployment's NATS URL (its workers and gateways serve the load) instead of servers in this process"),
		creds:    fs.String("creds", defaultCreds(), "with --load --server: the deployment's operator credentials (tokens are minted with them)"),
		tls:      addClientTLS(fs), // with --load --server
	}
}

func runLoad(lf loadFlagSet, sync embedded.Sync, asJSON, quiet bool, stdout, stderr io.Writer) int {
	if *lf.duration < 0 {
		fmt.Fprintf(stderr, "sessionbus bench: --load %v is negative: give a duration such as 60s\n", *lf.duration)
		return 2
	}
	if *lf.server != "" && *lf.cluster > 0 {
		fmt.Fprintln(stderr, "sessionbus bench: --server and --load-cluster exclude each other: load an external deployment or start one here")
		return 2
	}
	o := bench.LoadOptions{Duration: *lf.duration, Clients: *lf.clients, Cluster: *lf.cluster, Server: *lf.server, Sync: sync, Log: stderr}
	if quiet {
		o.Log = nil
	}
	if o.Server != "" {
		op, err := bus.LoadOperator(*lf.creds)
		if err != nil {
			fmt.Fprintln(stderr, "sessionbus bench:", err)
			return 1
		}
		o.Operator = op
		o.ConnectOptions = credsOptions(*lf.creds)
		topts, err := lf.tls.options()
		if err != nil {
			fmt.Fprintln(stderr, "sessionbus bench:", err)
			return 1
		}
		o.ConnectOptions = append(o.ConnectOptions, topts...)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunLoad(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus bench:", err)
		return 1
	}
	return writeReport(rep, asJSON, stdout, stderr)
}
