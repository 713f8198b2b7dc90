package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/importer/openclawstore"
)

// importOpenClaw loads an OpenClaw state directory: progress on stderr
// about once a second, the summary line on stderr, the summary JSON on
// stdout.
func importOpenClaw(server serverFlags, creds, prefix, dir string, o openclawstore.Options, stdout, stderr io.Writer) int {
	st, err := openclawstore.Open(dir)
	if err != nil {
		return fail(stderr, bus.CodeBadRequest, err)
	}
	defer st.Close()
	nc, err := server.connect("sessionbus import", credsOptions(creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	// No overall deadline: a large store takes as long as it takes, and
	// Ctrl-C stops it cleanly (a re-run finishes the job).
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(stderr, bus.CodeInternal, err)
	}
	store, tr, err := openSessionStores(ctx, nc, js, bus.NewNames(prefix))
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	o.Progress = func(p openclawstore.Progress) {
		if p.Sessions == p.TotalSessions && p.Elapsed.Seconds() < 1 {
			return // a small import: the summary line says it all
		}
		rate, srate := 0.0, 0.0
		if s := p.Elapsed.Seconds(); s > 0 {
			rate, srate = float64(p.Entries)/s, float64(p.Sessions)/s
		}
		fmt.Fprintf(stderr, "progress: %d/%d sessions, %d entries appended, %.0fs (%.0f sessions/s, %.0f entries/s)\n", p.Sessions, p.TotalSessions, p.Entries, p.Elapsed.Seconds(), srate, rate)
	}
	sum, err := openclawstore.Import(ctx, st, store, tr, o)
	if err != nil {
		if errors.Is(err, openclawstore.ErrInvalid) {
			return fail(stderr, bus.CodeBadRequest, err)
		}
		if sum != nil && sum.Seconds > 0 {
			fmt.Fprintln(stderr, sum.Line())
		}
		return fail(stderr, bus.CodeInternal, err)
	}
	fmt.Fprintln(stderr, sum.Line())
	printJSON(stdout, sum)
	return 0
}
