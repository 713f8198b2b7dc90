package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/sessionbus/sessionbus/ops/bench"
)

func cmdBench(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("bench", stderr)
	only := fs.String("only", "", "comma-separated benchmarks to run (their baselines run too); known: "+strings.Join(bench.Names(), ", "))
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	quick := fs.Bool("quick", false, "scale every data set and iteration count down (smoke test)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	tcp := fs.Bool("tcp", false, "connect the worker and gateways over TCP loopback, as separate processes would (default: in-process, as serve runs them)")
	syncFlag := syncFlags(fs)
	insecure := fs.Bool("insecure", false, "run the server without NATS-level auth, as serve --insecure does (default: with auth, as serve runs: every connection a role's user, baselines too)")
	_ = fs.Bool("auth", true, "accepted for older scripts: auth is on unless --insecure")
	idle := fs.Duration("idle", 0, "how long bytes_per_session_100k sits idle between its two measurements (default: two lifecycle sweeps, 2m10s)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	heapProfile := fs.String("heapprofile", "", "bytes_per_session_100k writes heap profiles of its two measurements to this path + .load and + .idle (go tool pprof reads them)")
	lf := loadFlags(fs)
	tf := tenantsFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessionbus bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *idle < 0 {
		fmt.Fprintf(stderr, "sessionbus bench: --idle %v must not be negative\n", *idle)
		return 2
	}
	syncMode, err := syncFlag()
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus bench:", err)
		return 2
	}
	if *tf.counts != "" {
		if *lf.duration != 0 {
			fmt.Fprintln(stderr, "sessionbus bench: --tenants and --load exclude each other: run one, then the other")
			return 2
		}
		return runTenantsBench(tf, syncMode, *asJSON, *quiet, stdout, stderr)
	}
	if *lf.duration != 0 {
		return runLoad(lf, syncMode, *asJSON, *quiet, stdout, stderr)
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	if err := bench.Check(names); err != nil {
		fmt.Fprintln(stderr, "sessionbus bench:", err)
		return 2
	}
	opts := bench.Options{Only: names, Quick: *quick, Log: stderr, TCP: *tcp, Sync: syncMode, Insecure: *insecure, Idle: *idle, HeapProfile: *heapProfile}
	if *quiet {
		opts.Log = nil
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "sessionbus bench: --cpuprofile:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "sessionbus bench: --cpuprofile:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "sessionbus bench:", err)
		return 1
	}
	return writeReport(rep, *asJSON, stdout, stderr)
}

// writeReport prints a suite's or a load run's report as a table, or as
// JSON with --json.
func writeReport(rep interface {
	WriteJSON(io.Writer) error
	WriteTable(io.Writer) error
}, asJSON bool, stdout, stderr io.Writer) int {
	write := rep.WriteTable
	if asJSON {
		write = rep.WriteJSON
	}
	if err := write(stdout); err != nil {
		fmt.Fprintln(stderr, "sessionbus bench:", err)
		return 1
	}
	return 0
}
