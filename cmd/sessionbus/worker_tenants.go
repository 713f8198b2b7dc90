package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/ops/tenants"
)

// workerTenantsFlags are worker's flags for serving many tenants.
type workerTenantsFlags struct {
	dir       *string
	noGateway *bool
}

func addWorkerTenantsFlags(fs *flag.FlagSet) workerTenantsFlags {
	return workerTenantsFlags{
		dir:       fs.String("tenants-dir", "", "serve every tenant in this directory from this process: one connection, worker and gateway per DIR/<tenant>.creds (docs/scale.md)"),
		noGateway: fs.Bool("no-gateway", false, "with --tenants-dir: run the tenants' workers only (their gateways run elsewhere)"),
	}
}

// tenantsConflicts names the flags set on the command line that mean one
// deployment's worker, which --tenants-dir replaces by each tenant's file.
func tenantsConflicts(fs *flag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "creds", "issuer", "metrics":
			out = append(out, "--"+f.Name)
		}
	})
	return out
}

// workerTenants runs `worker --tenants-dir DIR`: each tenant's worker (and
// gateway, when its file carries the token key) in this process, every
// one on a connection of its own account.
func workerTenants(fs *flag.FlagSet, tf workerTenantsFlags, server serverFlags, cfgPath, logLevel string, grace time.Duration, stdout, stderr io.Writer) int {
	if c := tenantsConflicts(fs); len(c) > 0 {
		fmt.Fprintf(stderr, "sessionbus worker: --tenants-dir takes each tenant's credentials and issuer from its DIR/<tenant>.creds: drop %s\n", strings.Join(c, ", "))
		return 2
	}
	list, err := tenants.Dir(*tf.dir)
	if err != nil {
		_ = failLine(stderr, "worker", err)
		return 1
	}
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("worker", cfgPath, logLevel, stderr)
	if err != nil {
		return 1
	}
	topts, err := server.tls.options()
	if err != nil {
		_ = failLine(stderr, "worker", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sigs: // a stop while the tenants start ends the start
			cancel()
		case <-ctx.Done():
		}
	}()
	h, err := tenants.Start(ctx, list, tenants.Options{Servers: *server.url, Config: cfg, NoGateway: *tf.noGateway, Connect: topts, Log: log})
	if err != nil {
		_ = failLine(stderr, "worker", err)
		return 1
	}
	defer h.Stop(grace)
	log.Info("tenants running", "tenants", len(list), "dir", *tf.dir)
	fmt.Fprintln(stdout, "ready", *server.url, strings.Join(h.Tenants(), " "))
	<-ctx.Done()
	log.Info("shutting down", "grace", grace)
	return 0
}
