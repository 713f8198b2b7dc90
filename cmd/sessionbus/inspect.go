package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/ops/inspect"
)

// opsFlags are the flags inspect and replay share: they read a
// deployment's streams and buckets directly.
type opsFlags struct {
	server        serverFlags
	creds, prefix *string
	asJSON        *bool
}

func newOpsFlags(fs *flag.FlagSet) opsFlags {
	return opsFlags{
		server: newServerFlags(fs),
		// only reads streams and buckets: no caller token is minted
		creds:  fs.String("creds", defaultCreds(), "credentials file: with NATS auth, one with the admin's or ops' NATS user (serve writes the admin's as operator.creds); a file without a NATS user is ignored"),
		prefix: fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)"),
		asJSON: fs.Bool("json", false, "print JSON instead of text"),
	}
}

// open connects for a read-only command.
func (o opsFlags) open(name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := o.server.connect("sessionbus "+name, credsOptions(*o.creds)...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func cmdInspect(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("inspect", stderr)
	of := newOpsFlags(fs)
	stuck := fs.Duration("stuck", inspect.DefaultStuckAfter, "list a run as stuck when it has been pending or running this long")
	timeout := fs.Duration("timeout", time.Minute, "give up reading after this long")
	cfgPath := fs.String("config", "", "config file, for session.maintenance.maxDiskBytes (default: ./sessionbus.yaml or .json if present)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessionbus inspect: unexpected argument %q (it takes flags only)\n", fs.Arg(0))
		return 2
	}
	if *stuck <= 0 {
		fmt.Fprintf(stderr, "sessionbus inspect: --stuck %v: give a positive duration such as 15m\n", *stuck)
		return 2
	}
	nc, js, err := of.open("inspect")
	if err != nil {
		_ = failLine(stderr, "inspect", err)
		return 1
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	names := bus.NewNames(*of.prefix)
	rep, err := inspect.Read(ctx, js, inspect.Options{Names: names, StuckAfter: *stuck})
	if err != nil {
		_ = failLine(stderr, "inspect", err)
		return 1
	}
	if rep.HasStream("OBJ_" + names.ArchivesBucket()) {
		if rep.Archive, err = archiveBudget(ctx, nc, names, *cfgPath, stderr); err != nil {
			_ = failLine(stderr, "inspect", err)
			return 1
		}
	}
	if *of.asJSON {
		printJSON(stdout, rep)
		return 0
	}
	if err := rep.WriteText(stdout); err != nil {
		_ = failLine(stderr, "inspect", err)
		return 1
	}
	return 0
}

// archiveBudget measures the archives against the configured disk budget
// (a malformed one reads as disabled, with the config's warning).
func archiveBudget(ctx context.Context, nc *nats.Conn, names bus.Names, cfgPath string, stderr io.Writer) (*lifecycle.Budget, error) {
	cfg, err := config.Load(cfgPath, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return nil, err
	}
	ops, closeOps, err := openOps(ctx, nc, names, stderr)
	if err != nil {
		return nil, err
	}
	defer closeOps()
	limit, enabled := cfg.DiskBudget()
	b, _, err := ops.State(ctx, limit, enabled)
	return b, err
}
