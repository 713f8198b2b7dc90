package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/ops/search"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/sanitize"
)

func init() {
	helps["indexer"] = cmdHelp{
		usage:   "indexer [flags]",
		purpose: "Run a transcript search indexer: follow SB_TRANSCRIPTS into a full-text index and answer `sessionbus search` (<prefix>.ops.search) in a queue group with the other indexers.",
		notes: "Each indexer keeps a full replica in its --index file; a missing file is rebuilt from the stream\n" +
			"(searches are refused with progress until it is done), --rebuild rebuilds it on demand. serve\n" +
			"runs one (DATA/search/index.db).",
		examples: []string{
			"sessionbus indexer --creds DATA/creds/worker.creds --index /var/lib/sessionbus/search.db",
			"sessionbus indexer --rebuild",
		},
	}
	helps["search"] = cmdHelp{
		usage:   "search [flags] TEXT",
		purpose: "Find a phrase in every transcript (user and assistant text, redacted as sessions_history shows it); prints the hits newest first with the index's lag.",
		examples: []string{
			`sessionbus search "quarterly report"`,
			`sessionbus search --agent main --since 24h --json "deploy failed"`,
		},
	}
}

// indexerFile is where serve keeps its indexer's file in its data dir.
func indexerFile(data string) string { return filepath.Join(data, "search", "index.db") }

func cmdIndexer(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("indexer", stderr)
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "credentials of the worker role (or the admin's): the indexer reads the streams and serves a subject")
	cfgPath := fs.String("config", "", "config file, for bus.prefix, session.mainKey/scope and the redaction settings (default: ./sessionbus.yaml or .json if present)")
	index := fs.String("index", indexerFile(defaultData()), "the index file (SQLite); created and built from the stream when missing")
	rebuild := fs.Bool("rebuild", false, "remove the index file and build it again from the stream")
	tools := fs.Bool("tools", false, "index tool results too (their text, redacted); the config's search.includeTools does the same")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessionbus indexer: unexpected argument %q (it takes flags only)\n", fs.Arg(0))
		return 2
	}
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("indexer", *cfgPath, *logLevel, stderr)
	if err != nil {
		return 1
	}
	if err := checkProcessRole("indexer", *creds); err != nil {
		_ = failLine(stderr, "indexer", err)
		return 1
	}
	nc, err := server.connect("sessionbus indexer", credsOptions(*creds)...)
	if err != nil {
		_ = failLine(stderr, "indexer", err)
		return 1
	}
	defer closeConn(nc)
	ix, err := startIndexer(context.Background(), nc, cfg, *index, *rebuild, *tools || cfg.Search.IncludeTools, log)
	if err != nil {
		_ = failLine(stderr, "indexer", err)
		return 1
	}
	defer ix.stop()
	fmt.Fprintln(stdout, "ready", *index)
	<-sigs
	log.Info("shutting down")
	return 0
}

// runningIndexer is an indexer and its endpoint.
type runningIndexer struct {
	in  *search.Indexer
	svc *search.Service
}

// startIndexer opens the index at path, follows the stream and serves
// the search subject on nc.
func startIndexer(ctx context.Context, nc *nats.Conn, cfg *config.Config, path string, rebuild, tools bool, log *slog.Logger) (*runningIndexer, error) {
	red, err := sanitize.NewRedactor(cfg.Logging.RedactSensitive, cfg.Logging.RedactPatterns)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	// the sessions' state must load before the first answer (Start waits
	// for it); the entries themselves are indexed in the background
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	in, err := search.Start(ctx, search.Options{
		NC: nc, JS: js, Names: bus.NewNames(cfg.Bus.Prefix), Path: path, Rebuild: rebuild, WithTools: tools,
		Redactor: red, Alias: rules.ResolveAlias(cfg.Session.MainKey, cfg.Session.Scope), Log: log,
	})
	if err != nil {
		return nil, err
	}
	svc, err := search.Serve(nc, in)
	if err != nil {
		in.Close()
		return nil, err
	}
	return &runningIndexer{in: in, svc: svc}, nil
}

// startIndexerBehind starts an indexer without waiting for it (serve:
// its ready line does not wait for the sessions' state to load, which
// takes seconds at a million sessions); a failure is logged and serve runs
// on without search. rebuild starts the index over (a demo's data dir that
// started over: its stream is new). stop ends it, started or not.
func startIndexerBehind(nc *nats.Conn, cfg *config.Config, path string, rebuild, tools bool, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *runningIndexer, 1)
	go func() {
		r, err := startIndexer(ctx, nc, cfg, path, rebuild, tools, log)
		if err != nil && ctx.Err() == nil {
			log.Warn("transcript search not started", "err", err)
		}
		started <- r
	}()
	return func() {
		cancel()
		(<-started).stop()
	}
}

func (r *runningIndexer) stop() {
	if r == nil {
		return
	}
	r.svc.Stop()
	r.in.Close()
}
