package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/ops/bench"
)

// tenantsFlagSet is bench's --tenants mode.
type tenantsFlagSet struct {
	counts *string
	idle   *time.Duration
}

func tenantsFlags(fs *flag.FlagSet) tenantsFlagSet {
	return tenantsFlagSet{
		counts: fs.String("tenants", "", "instead of the suite: measure what an idle tenant costs on a 3-node in-process cluster at each of these tenant counts, e.g. 1,10,30 (docs/scale.md)"),
		idle:   fs.Duration("tenants-idle", bench.DefaultTenantsIdle, "with --tenants: each idle CPU window"),
	}
}

// parseCounts reads --tenants: positive counts, comma-separated.
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--tenants %q: give tenant counts of 1 or more, comma-separated, e.g. 1,10,30", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func runTenantsBench(tf tenantsFlagSet, sync embedded.Sync, asJSON, quiet bool, stdout, stderr io.Writer) int {
	counts, err := parseCounts(*tf.counts)
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus bench:", err)
		return 2
	}
	if *tf.idle < time.Second {
		fmt.Fprintf(stderr, "sessionbus bench: --tenants-idle %v is too short to read idle CPU from: use 1s or more\n", *tf.idle)
		return 2
	}
	o := bench.TenantsOptions{Counts: counts, Idle: *tf.idle, Sync: sync, Log: stderr}
	if quiet {
		o.Log = nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunTenants(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus bench:", err)
		return 1
	}
	return writeReport(rep, asJSON, stdout, stderr)
}
