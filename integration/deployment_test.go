package integration

import (
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus/embedded"

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
	d.creds = filepath.Join(d.dir, "operator.creds")
	if err := d.op.WriteCreds(d.creds); err != nil {
		t.Fatal(err)
	}
	return d
}
