package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/archives"
)

// cmdArchive reads and restores archives directly in JetStream, as
// `import` writes transcripts: no worker needed.
func cmdArchive(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeHelp(stderr, "archive", nil)
		return 2
	}
	sub := args[0]
	switch sub {
	case "ls", "get", "restore", "budget":
	case "-h", "--help", "-help", "help":
		// ls takes every flag the others take, and its own two
		cmdArchive([]string{"ls", "-h"}, nil, stdout, stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "sessionbus archive: unknown subcommand %q\n\n", sub)
		writeHelp(stderr, "archive", nil)
		return 2
	}
	fs := newFlags("archive "+sub, stderr)
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "credentials file; with NATS auth, one with the admin's or ops' NATS user (serve writes the admin's as operator.creds)")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	cfgPath := fs.String("config", "", "config file, for session.maintenance.maxDiskBytes (default: ./sessionbus.yaml or .json if present)")
	agent, asJSON := new(string), new(bool)
	if sub == "ls" {
		agent = fs.String("agent", "", "ls: only this agent's archives")
		asJSON = fs.Bool("json", false, "ls: a JSON array instead of a table")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	wantArg := sub == "get" || sub == "restore"
	if (wantArg && fs.NArg() != 1) || (!wantArg && fs.NArg() != 0) {
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*cfgPath, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return fail(stderr, bus.CodeBadRequest, err)
	}
	nc, err := server.connect("sessionbus archive "+sub, credsOptions(*creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ops, closeOps, err := openOps(ctx, nc, bus.NewNames(*prefix), stderr)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer closeOps()
	limit, enabled := cfg.DiskBudget()
	switch sub {
	case "ls":
		b, all, err := ops.State(ctx, limit, enabled)
		if err != nil {
			return fail(stderr, bus.CodeUnavailable, err)
		}
		rows := make([]*archives.Meta, 0, len(all))
		for _, m := range all {
			if *agent == "" || m.AgentID == *agent {
				c := *m
				c.Entry = nil // the session entry: for restore and sessions_list
				rows = append(rows, &c)
			}
		}
		if *asJSON {
			printJSON(stdout, rows)
		} else {
			tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKEY\tREASON\tSTATE\tENTRIES\tBYTES\tCOMPRESSED\tRATIO\tAT")
			for _, m := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.1f\t%s\n", m.ID, m.Key, m.Reason, m.State, m.Entries, m.Bytes, m.Compressed,
					m.Ratio(), time.UnixMilli(m.At).UTC().Format(time.RFC3339))
			}
			tw.Flush()
		}
		fmt.Fprintln(stderr, b.Line())
	case "budget":
		b, _, err := ops.State(ctx, limit, enabled)
		if err != nil {
			return fail(stderr, bus.CodeUnavailable, err)
		}
		printJSON(stdout, b)
		fmt.Fprintln(stderr, b.Line())
	case "get":
		m, err := ops.Archives.Find(ctx, fs.Arg(0))
		if err != nil {
			return fail(stderr, archiveCode(err), err)
		}
		fmt.Fprintf(stderr, "archive %s: %s, %s, %d entries, %d bytes (%d compressed)\n", m.ID, m.Key, m.Reason, m.Entries, m.Bytes, m.Compressed)
		w := bufio.NewWriterSize(stdout, 256<<10)
		if _, err := ops.Archives.Read(ctx, m.ID, w); err != nil {
			w.Flush()
			return fail(stderr, archiveCode(err), err)
		}
		if err := w.Flush(); err != nil {
			return fail(stderr, bus.CodeInternal, err)
		}
	case "restore":
		res, err := ops.Restore(ctx, fs.Arg(0), func(n int) { fmt.Fprintf(stderr, "restore: %d entries appended\n", n) })
		if err != nil {
			return fail(stderr, archiveCode(err), err)
		}
		fmt.Fprintln(stderr, res.Summary())
		printJSON(stdout, res)
	}
	return 0
}

func archiveCode(err error) int {
	switch {
	case errors.Is(err, archives.ErrNotFound):
		return bus.CodeNotFound
	case errors.Is(err, archives.ErrCorrupt):
		return bus.CodeInternal
	}
	return bus.CodeUnavailable
}

// openOps opens the stores the archive commands use.
func openOps(ctx context.Context, nc *nats.Conn, names bus.Names, stderr io.Writer) (*lifecycle.Ops, func(), error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	o := &lifecycle.Ops{JS: js, Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if o.Sessions, o.Transcripts, err = openSessionStores(ctx, nc, js, names); err != nil {
		return nil, nil, err
	}
	if o.Archives, err = archives.Open(ctx, js, names); err != nil {
		o.Transcripts.Close()
		return nil, nil, err
	}
	return o, o.Transcripts.Close, nil
}
