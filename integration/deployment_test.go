package integration

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/streams/transcripts"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/config/configtest"
)

// deployment is what the process-level tests share: a server, a client
// connection, a config written to a file the child processes read, and an
// operator key whose creds file they are given.
type deployment struct {
	s       *embedded.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	dir     string
	cfg     *config.Config
	cfgPath string
	op      *bus.Operator
	creds   string
}

func newDeployment(t *testing.T, configYAML string) *deployment {
	t.Helper()
	d := &deployment{s: bustest.Server(t), dir: t.TempDir()}
	d.nc, d.js = bustest.Connect(t, d.s)
	d.cfg, d.cfgPath = configtest.Load(t, d.dir, "sessionbus.yaml", configYAML)
	var err error
	if d.op, err = bus.NewOperator(); err != nil {
		t.Fatal(err)
	}
	d.creds = bustest.AdminCreds(t, d.s.Deployment(), d.op)
	return d
}

// startWorker runs a tool worker in the test process against the
// deployment, stopped when the test ends.
func (d *deployment) startWorker(t *testing.T) *handlers.Worker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := handlers.StartWorker(ctx, d.nc, d.cfg, bus.NewVerifier(d.op.PublicKey()), nil)
	if err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}

// transcriptEntries reads the whole transcript of session.
func transcriptEntries(t *testing.T, tr *transcripts.Store, session string) []transcripts.Entry {
	t.Helper()
	ctx := bustest.Context(t)
	enc := bus.EncodeKey(session)
	n, err := tr.Count(ctx, enc)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := tr.Read(ctx, enc, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
