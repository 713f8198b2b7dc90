package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/flows/importer/openclawstore"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

func cmdImport(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("import", stderr)
	server := newServerFlags(fs)
	agent := fs.String("agent", "", "agent id (default: from the session key)")
	label := fs.String("label", "", "session label")
	spawnedBy := fs.String("spawned-by", "", "parent session key, so the session joins its parent's tree")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	creds := fs.String("creds", defaultCreds(), "credentials file; with NATS auth, one with the admin's NATS user (serve writes it as operator.creds)")
	openclaw := fs.String("openclaw", "", "import an OpenClaw state directory (such as ~/.openclaw): every agent's sessions and transcripts, instead of one transcript from stdin")
	parallel := fs.Int("parallel", 8, "with --openclaw: sessions imported at once")
	skipInvalid := fs.Bool("skip-invalid", false, "with --openclaw: import the valid sessions when some cannot be imported (they are listed), instead of refusing the store")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *openclaw != "" {
		if fs.NArg() != 0 || *agent != "" || *label != "" || *spawnedBy != "" {
			fmt.Fprintln(stderr, "sessionbus import: --openclaw takes no SESSIONKEY, --agent, --label or --spawned-by (keys, agents, labels and parents come from the store)")
			return 2
		}
		if *parallel < 1 || *parallel > 256 {
			fmt.Fprintf(stderr, "sessionbus import: --parallel %d must be between 1 and 256\n", *parallel)
			return 2
		}
		return importOpenClaw(server, *creds, *prefix, *openclaw, openclawstore.Options{Parallel: *parallel, SkipInvalid: *skipInvalid}, stdout, stderr)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	nc, err := server.connect("sessionbus import", credsOptions(*creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(stderr, bus.CodeInternal, err)
	}
	store, tr, err := openSessionStores(ctx, nc, js, bus.NewNames(*prefix))
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	res, err := importer.Import(ctx, store, tr, importer.ImportOptions{
		SessionKey: fs.Arg(0), AgentID: *agent, Label: *label, SpawnedBy: *spawnedBy,
	}, stdin, time.Now())
	if err != nil {
		return fail(stderr, bus.CodeInternal, err)
	}
	fmt.Fprintln(stderr, res.Summary())
	printJSON(stdout, res)
	return 0
}

// openSessionStores opens the session entries and the transcripts, for the
// commands that write them directly (import, import --openclaw, archive).
func openSessionStores(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, names bus.Names) (*sessions.Store, *transcripts.Store, error) {
	store, err := sessions.Open(ctx, js, names)
	if err != nil {
		return nil, nil, err
	}
	tr, err := transcripts.Open(ctx, nc, js, names)
	if err != nil {
		return nil, nil, err
	}
	return store, tr, nil
}
