package integration

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/config/configtest"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
)

// clusterDeployment is the fault tests' world: a 3-node JetStream cluster
// in this process (random loopback ports, a store dir per node), a config
// whose streams and buckets are all R3, and an operator key. Workers and
// gateways run in-process against it (or as processes, with cfgPath and
// creds); nodes are stopped, wiped and restarted through c.
type clusterDeployment struct {
	c       *embedded.Cluster
	cfg     *config.Config
	cfgPath string
	op      *bus.Operator
	creds   string
	names   bus.Names
}

// clusterReplicas is the replica count of every stream and bucket the
// fault tests create.
const clusterReplicas = 3

// newClusterDeployment starts the cluster. configYAML must set
// bus.replicas to 3 (child processes read the file).
func newClusterDeployment(t *testing.T, configYAML string) *clusterDeployment {
	t.Helper()
	began := time.Now()
	d := &clusterDeployment{c: bustest.NewCluster(t, 3)}
	t.Logf("3-node cluster up in %v", time.Since(began).Round(time.Millisecond))
	dir := t.TempDir()
	d.cfg, d.cfgPath = configtest.Load(t, dir, "sessionbus.yaml", configYAML)
	if d.cfg.Bus.Replicas != clusterReplicas {
		t.Fatalf("cluster config must set bus.replicas: %d (has %d)", clusterReplicas, d.cfg.Bus.Replicas)
	}
	d.names = bus.NewNames(d.cfg.Bus.Prefix)
	var err error
	if d.op, err = bus.NewOperator(); err != nil {
		t.Fatal(err)
	}
	d.creds = bustest.AdminCreds(t, d.c.Deployment(), d.op)
	return d
}

// connect opens a client connection that knows every node and reconnects
// forever, preferring node `first` (-1: any).
func (d *clusterDeployment) connect(t *testing.T, name string, first int) *nats.Conn {
	t.Helper()
	urls := d.c.URLs()
	opts := append(bustest.Options(t, d.c.Deployment()), nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if first >= 0 {
		urls = d.c.URL(first) + "," + urls
		opts = append(opts, nats.DontRandomize())
	}
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// logger shows warnings and errors of in-process workers and gateways.
// SESSIONBUS_TEST_LOG=debug|info shows more.
func clusterLogger(component string) *slog.Logger {
	level := slog.LevelWarn
	_ = level.UnmarshalText([]byte(os.Getenv("SESSIONBUS_TEST_LOG")))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", component)
}

// startWorker starts an in-process worker on nc, retrying while the
// cluster settles (R3 assets can fail right after an election).
func (d *clusterDeployment) startWorker(t *testing.T, nc *nats.Conn) *handlers.Worker {
	t.Helper()
	var w *handlers.Worker
	began := time.Now()
	retryFor(t, 90*time.Second, "start worker", func(ctx context.Context) error {
		var err error
		w, err = handlers.StartWorker(ctx, nc, d.cfg, bus.NewVerifier(d.op.PublicKey()), clusterLogger("worker"))
		return err
	})
	t.Logf("worker on %q started in %v", nc.Opts.Name, time.Since(began).Round(time.Millisecond))
	t.Cleanup(w.Stop)
	return w
}

// startGateway starts an in-process gateway replica on nc.
func (d *clusterDeployment) startGateway(t *testing.T, nc *nats.Conn, id string, ackWait time.Duration) *gateway.Gateway {
	t.Helper()
	var g *gateway.Gateway
	began := time.Now()
	retryFor(t, 90*time.Second, "start gateway "+id, func(ctx context.Context) error {
		var err error
		g, err = gateway.StartWithOptions(ctx, nc, d.cfg, d.op, id, clusterLogger(id), gateway.Options{AckWait: ackWait})
		return err
	})
	t.Logf("gateway %s started in %v", id, time.Since(began).Round(time.Millisecond))
	t.Cleanup(g.Stop)
	return g
}

// waitStreamLeader waits until stream has a leader and returns its node.
func (d *clusterDeployment) waitStreamLeader(t *testing.T, stream string) int {
	t.Helper()
	leader := -1
	bustest.WaitFor(t, 30*time.Second, "a leader of "+stream, func() bool {
		leader = d.c.StreamLeader(stream)
		return leader >= 0
	})
	return leader
}

// killStreamLeader stops the node leading stream, waits until another node
// leads it, and starts the stopped node again on its store. It returns
// the node it killed.
func (d *clusterDeployment) killStreamLeader(t *testing.T, stream string) int {
	t.Helper()
	victim := d.waitStreamLeader(t, stream)
	d.c.Stop(victim)
	next := d.waitStreamLeader(t, stream)
	t.Logf("stopped %s (leader of %s); %s leads it now", d.c.Name(victim), stream, d.c.Name(next))
	if err := d.c.Start(victim); err != nil {
		t.Fatal(err)
	}
	return victim
}

// retryFor calls fn with a 15 s context until it succeeds or within has
// passed: a cluster answers "temporarily unavailable" or times out while
// leaders move.
func retryFor(t *testing.T, within time.Duration, what string, fn func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: gave up after %v: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond) // back off before the next attempt, not a sync
	}
}
