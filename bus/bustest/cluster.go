package bustest

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/embedded"
)

// NewCluster starts n clustered JetStream servers in-process on random
// loopback ports, each with its own store dir under the test's temp dir,
// with NATS auth (ClusterOptions connects with the credentials) and
// authenticated routes, and waits until they have a meta leader. Nodes can
// be stopped, wiped and started again on the same ports; every node stops
// when the test ends.
func NewCluster(t testing.TB, n int) *embedded.Cluster {
	t.Helper()
	c, err := embedded.StartLoopbackCluster(t.TempDir(), "sessionbus-test", n, embedded.LazySync, Deployment(t))
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// Cluster is NewCluster for tests that only need the servers as started,
// and the options to connect to them with.
func Cluster(t testing.TB, n int) ([]*server.Server, []nats.Option) {
	t.Helper()
	c := NewCluster(t, n)
	servers := make([]*server.Server, n)
	for i := range servers {
		servers[i] = c.Server(i)
	}
	return servers, Options(t, c.Deployment())
}

// URLs joins the client URLs of servers for nats.Connect.
func URLs(servers []*server.Server) string {
	var us []string
	for _, s := range servers {
		us = append(us, s.ClientURL())
	}
	return strings.Join(us, ",")
}
