package main

import (
	"fmt"
	"io"

	"github.com/sessionbus/sessionbus/bus/embedded"
)

// serveNode runs serve --cluster N --node I: node I alone, in this
// process, of a cluster whose other nodes run as processes of their own
// on the same data dir (sessionbus up, or one service unit per node).
// No worker or gateway runs here: they are processes of their own too.
// Each node writes the credentials files and the client config (under the
// deploy lock), so whichever starts first readies the data dir for the
// workers and gateways.
func serveNode(o clusterServe, host string, port int, stdout, stderr io.Writer) int {
	sigs, release := catchStop()
	defer release()
	log, cfg, err := commandSetup("serve", o.cfgPath, o.logLevel, stderr)
	if err != nil {
		return 1
	}
	co := embedded.ClusterOptions{DataDir: o.data, Host: host, Sync: o.sync, TLS: o.tls, Node: o.node}
	co.ClientPorts, co.RoutePorts = clusterPorts(port, o.nodes)
	d, op, err := clusterDeployment(o.data, o.auth)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	co.Auth = d
	c, err := embedded.StartCluster(co)
	if err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	defer c.Shutdown()
	if o.auth {
		warnCleartext(log, o.listen, o.tls != nil)
	}
	by := fmt.Sprintf("serve --cluster %d --node %d", o.nodes, o.node)
	if err := publishDeployment(o.data, c.URLs(), by, cfg.Bus.Prefix, co.Auth, op); err != nil {
		_ = failLine(stderr, "serve", err)
		return 1
	}
	log.Info("cluster node running", "node", c.Name(o.node-1), "of", o.nodes, "url", c.URL(o.node-1), "data", c.DataDir(o.node-1))
	fmt.Fprintln(stdout, "ready", c.URL(o.node-1))
	<-sigs
	log.Info("shutting down")
	return 0
}
