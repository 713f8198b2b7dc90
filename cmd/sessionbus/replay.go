package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/ops/replay"
)

// stopContext ends on SIGINT or SIGTERM: replay --follow runs until then.
// A variable, so a test can end it.
var stopContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func cmdReplay(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("replay", stderr)
	of := newOpsFlags(fs)
	follow := fs.Bool("follow", false, "after the history, print what is stored from now on, until interrupted")
	timeout := fs.Duration("timeout", time.Minute, "give up reading the history after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	nc, js, err := of.open("replay")
	if err != nil {
		_ = failLine(stderr, "replay", err)
		return 1
	}
	defer nc.Close()
	r, err := replay.New(js, bus.NewNames(*of.prefix), fs.Arg(0))
	if err != nil {
		_ = failLine(stderr, "replay", err)
		return 2
	}
	defer r.Close()
	ctx, stop := stopContext()
	defer stop()
	hctx, cancel := context.WithTimeout(ctx, *timeout)
	events, err := r.History(hctx, *follow)
	cancel()
	if err != nil {
		_ = failLine(stderr, "replay", err)
		return 1
	}
	if err := replay.Write(stdout, events, *of.asJSON); err != nil {
		_ = failLine(stderr, "replay", err)
		return 1
	}
	if !*follow {
		return 0
	}
	fmt.Fprintln(stderr, "sessionbus replay: following", fs.Arg(0), "(interrupt to stop)")
	if err := r.Follow(ctx, func(ev replay.Event) {
		_ = replay.Write(stdout, []replay.Event{ev}, *of.asJSON)
	}); err != nil {
		_ = failLine(stderr, "replay", err)
		return 1
	}
	return 0
}
