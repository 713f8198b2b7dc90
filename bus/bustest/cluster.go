package bustest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster starts n clustered JetStream servers in-process (the recipe of
// nats-server's own tests: unique names, own store dirs, every node lists
// every route) and waits until they have a meta leader.
func Cluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	base := t.TempDir()
	servers := make([]*server.Server, n)
	for i := range servers {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1", Port: -1,
			JetStream: true,
			StoreDir:  filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			Cluster:   server.ClusterOpts{Name: "sessionbus-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:    routes,
			NoLog:     true, NoSigs: true,
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatalf("cluster node %d: %v", i+1, err)
		}
		go s.Start()
		servers[i] = s
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	}
	for _, s := range servers {
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("cluster node %s not ready", s.Name())
		}
	}
	deadline := time.Now().Add(40 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		leaders := 0
		for _, s := range servers {
			if s.JetStreamIsLeader() {
				leaders++
			}
		}
		if leaders == 1 && servers[0].JetStreamIsCurrent() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cluster has no JetStream meta leader after 40s")
		}
	}
	return servers
}

// URLs joins the client URLs of servers for nats.Connect.
func URLs(servers []*server.Server) string {
	var us []string
	for _, s := range servers {
		us = append(us, s.ClientURL())
	}
	return strings.Join(us, ",")
}

// freePort finds a free port for a route listener: routes must be known
// before the servers start (a small race, acceptable in tests).
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
