package bench

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// localCluster is n clustered JetStream servers in this process, on
// loopback, each with its own store dir under one parent: the recipe of
// bustest.Cluster, for the bench (which has no testing.TB).
type localCluster struct {
	servers []*server.Server
}

// startCluster starts n nodes and waits for a JetStream meta leader.
// syncAlways makes every node fsync each write before acknowledging it.
func startCluster(dir string, n int, syncAlways bool) (*localCluster, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	c := &localCluster{}
	for i := range n {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("load-n%d", i+1),
			Host:       "127.0.0.1", Port: -1,
			JetStream: true, SyncAlways: syncAlways,
			StoreDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			Cluster:  server.ClusterOpts{Name: "sessionbus-load", Host: "127.0.0.1", Port: ports[i]},
			Routes:   routes,
			NoLog:    true, NoSigs: true,
		})
		if err != nil {
			c.shutdown()
			return nil, fmt.Errorf("cluster node %d: %w", i+1, err)
		}
		go s.Start()
		c.servers = append(c.servers, s)
	}
	for _, s := range c.servers {
		if !s.ReadyForConnections(30 * time.Second) {
			c.shutdown()
			return nil, fmt.Errorf("cluster node %s not ready after 30s", s.Name())
		}
	}
	deadline := time.Now().Add(40 * time.Second)
	for {
		leaders := 0
		for _, s := range c.servers {
			if s.JetStreamIsLeader() {
				leaders++
			}
		}
		if leaders == 1 && c.servers[0].JetStreamIsCurrent() {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.shutdown()
			return nil, errors.New("cluster has no JetStream meta leader after 40s")
		}
		time.Sleep(50 * time.Millisecond) // polling the election: no event to wait on
	}
}

// url is node i's client URL.
func (c *localCluster) url(i int) string { return c.servers[i%len(c.servers)].ClientURL() }

func (c *localCluster) shutdown() {
	for _, s := range c.servers {
		s.Shutdown()
	}
	for _, s := range c.servers {
		s.WaitForShutdown()
	}
}
