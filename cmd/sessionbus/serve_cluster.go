package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/embedded"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/runtime/confine"
	"github.com/sessionbus/sessionbus/handlers"
)

// clusterServe is what `serve --cluster N` takes from serve's flags.
type clusterServe struct {
	nodes                 int
	data, listen, cfgPath string
	logLevel              string
	noGateway, demo, auth bool
	node                  int // > 0: run only this node (serve --node)
	sync                  embedded.Sync
	grace                 time.Duration
	tls                   *embedded.TLS // nil: no TLS
}

// clusterRouteOffset puts node i's route listener this far above its
// client port: 4222 -> 6222, nats-server's usual pair.
const clusterRouteOffset = 2000

// serveCluster runs N clustered nats-servers in this process (client
// ports from --listen up, route ports 2000 above each, stores under
// DATA/n1..nN), with a worker and a gateway whose connection knows every
// node. Streams and buckets are created R3 unless the config says
// otherwise: a local cluster for trying replication and killing nodes, not
// a production layout (one process, one disk).
func serveCluster(o clusterServe, stdout, stderr io.Writer) int {
	host, port, err := o.check()
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 2
	}
	if o.node > 0 {
		return serveNode(o, host, port, stdout, stderr)
	}
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("serve", o.cfgPath, o.logLevel, stderr)
	if err != nil {
		return 1
	}
	if cfg.Bus.Replicas == 1 {
		cfg.Bus.Replicas = 3
	}
	if cfg.Bus.Replicas > o.nodes {
		_ = failLine(stderr, "serve", fmt.Errorf("bus.replicas %d needs at least as many nodes: pass --cluster %d or more", cfg.Bus.Replicas, cfg.Bus.Replicas))
		return 2
	}
	co := embedded.ClusterOptions{DataDir: o.data, Host: host, Sync: o.sync, TLS: o.tls}
	if o.auth {
		if co.Auth, err = loadDeployment(o.data); err != nil {
			_ = failLine(stderr, "serve", err)
			return 1
		}
	}
	co.ClientPorts, co.RoutePorts = clusterPorts(port, o.nodes)
	c, err := embedded.StartCluster(co)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	defer c.Shutdown()
	if o.auth {
		warnCleartext(log, o.listen, o.tls != nil)
	}
	log.Info("cluster running", "nodes", o.nodes, "replicas", cfg.Bus.Replicas, "sync", o.sync.String(), "urls", c.URLs())
	op, err := bus.LoadOrCreateOperator(o.data)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	self, err := selfOptions(co.Auth, o.data, o.listen, cfg.Bus.Prefix, op, log)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	nc, err := selfTLS(o.tls).connect(c.URLs(), "sessionbus serve --cluster", self...)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	defer closeConn(nc)
	if err := writeClientConfig(o.data, c.URLs(), "serve --cluster", o.auth); err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	runCreds, err := runCredentials(c.UpdateAccount, co.Auth, cfg.Bus.Prefix)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	// Right after the first election the meta leader can still move and
	// R3 creates can fail: retry within the start-up minute.
	var w *handlers.Worker
	var gw *gateway.Gateway
	if !o.noGateway {
		confine.Harden(log, o.data) // as serve does
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if w == nil {
			w, err = startWorker(nc, cfg, op.PublicKey(), log)
		}
		if err == nil && gw == nil && !o.noGateway {
			gctx, gcancel := context.WithTimeout(context.Background(), 30*time.Second)
			gw, err = gateway.StartWithOptions(gctx, nc, cfg, op, "serve", log, gateway.Options{RunCredentials: runCreds})
			gcancel()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = failLine(stderr, "serve", err)
			if w != nil {
				w.Stop()
			}
			return 1
		}
		log.Warn("cluster not ready yet, retrying", "err", err)
		time.Sleep(500 * time.Millisecond) // back off before the next attempt
	}
	defer func() {
		w.Shutdown(o.grace)
		gw.Stop()
	}()
	fmt.Fprintln(stdout, "ready", c.URLs())
	<-sigs
	log.Info("shutting down", "grace", o.grace)
	return 0
}

// check refuses a --cluster command line that cannot work, and gives the
// listen host and the first node's client port.
func (o clusterServe) check() (host string, port int, err error) {
	if o.nodes < 3 || o.nodes%2 == 0 {
		return "", 0, fmt.Errorf("--cluster %d: use an odd number of nodes, 3 or more (a quorum must survive one node)", o.nodes)
	}
	if o.demo {
		return "", 0, fmt.Errorf("--demo runs on a single node: drop --cluster or --demo")
	}
	if o.node < 0 || o.node > o.nodes {
		return "", 0, fmt.Errorf("--node %d: pick a node from 1 to %d (--cluster %d)", o.node, o.nodes, o.nodes)
	}
	host, ps, err := net.SplitHostPort(o.listen)
	port, perr := strconv.Atoi(ps)
	if err != nil || perr != nil || port < 1 || port+o.nodes-1+clusterRouteOffset > 65535 {
		return "", 0, fmt.Errorf("--listen %q: with --cluster give host:port with a port from 1 to %d (node i listens on port+i-1, its route on that +%d)", o.listen, 65535-o.nodes+1-clusterRouteOffset, clusterRouteOffset)
	}
	return host, port, nil
}

// clusterPorts are the client and route ports of n nodes whose first
// client port is port.
func clusterPorts(port, n int) (client, route []int) {
	for i := range n {
		client = append(client, port+i)
		route = append(route, port+i+clusterRouteOffset)
	}
	return client, route
}
