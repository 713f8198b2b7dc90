package embedded

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// ClusterOptions configure a local JetStream cluster run in one process:
// what `serve --cluster N` starts for trying a replicated deployment, and
// what the fault tests start, kill and restart node by node.
type ClusterOptions struct {
	DataDir     string // node i stores under DataDir/n<i+1>
	Host        string // listen host of every node (default 127.0.0.1)
	ClientPorts []int  // one per node; fixed, so clients reconnect to a restarted node
	RoutePorts  []int  // one per node
	Name        string // cluster name (default sessionbus)
	Sync        Sync   // every node's file-store sync; the zero value flushes every write
	NoLock      bool   // skip the data-dir lock (tests own their temp dirs)
	// Auth, when set, runs every node in operator mode trusting this
	// deployment (as Options.Auth does for one server), and the routes
	// authenticate with the deployment's route secret.
	Auth *auth.Deployment
	// TLS, when set, requires TLS on every node's client port and on the
	// routes between the nodes.
	TLS *TLS
	// Node, when > 0, runs only that node (1-based) in this process: the
	// others are processes of their own with the same ports and data dir
	// (sessionbus up, one service unit per node). The lock is then the
	// node's own store dir's, and StartCluster returns once the node takes
	// connections, without waiting for a meta leader: the first node up
	// has no peer to elect one with.
	Node int
}

// Cluster is a set of clustered nats-servers in this process.
type Cluster struct {
	tls   *nodeTLS // nil without TLS
	mu    sync.Mutex
	nodes []*clusterNode
	lock  *flock.Flock
	// account is where the deployment's streams live: the tenant account
	// under auth, else the global account
	account string
	auth    *auth.Deployment
}

type clusterNode struct {
	opts server.Options // a copy is started each time: the server keeps its own
	ns   *server.Server // nil while stopped
}

// globalAccount is where every stream lives on servers without auth.
const globalAccount = server.DEFAULT_GLOBAL_ACCOUNT

// StartCluster starts len(o.ClientPorts) nodes, each listing every route
// (nats-server's own test recipe), and waits until they elect a meta
// leader, so streams can be created as soon as it returns.
func StartCluster(o ClusterOptions) (*Cluster, error) {
	n := len(o.ClientPorts)
	if n < 1 || len(o.RoutePorts) != n {
		return nil, fmt.Errorf("a cluster needs one client and one route port per node (got %d and %d)", n, len(o.RoutePorts))
	}
	if o.DataDir == "" {
		return nil, errors.New("no data dir: pass --data DIR")
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s is not usable: %v (pass a writable --data DIR)", o.DataDir, err)
	}
	host, name := o.Host, o.Name
	if host == "" {
		host = "127.0.0.1"
	}
	if name == "" {
		name = "sessionbus"
	}
	c := &Cluster{account: globalAccount, auth: o.Auth}
	var routeUser *url.Userinfo
	if o.Auth != nil {
		c.account = o.Auth.AccountKey(auth.DefaultAccount)
		secret, err := o.Auth.RouteSecret()
		if err != nil {
			return nil, err
		}
		routeUser = url.UserPassword(routeUserName, secret)
	}
	if o.Node < 0 || o.Node > n {
		return nil, fmt.Errorf("node %d of a %d-node cluster: pick 1 to %d", o.Node, n, n)
	}
	if !o.NoLock {
		lockDir := o.DataDir
		if o.Node > 0 {
			lockDir = filepath.Join(o.DataDir, fmt.Sprintf("n%d", o.Node))
			if err := os.MkdirAll(lockDir, 0o700); err != nil {
				return nil, fmt.Errorf("node dir %s is not usable: %v (pass a writable --data DIR)", lockDir, err)
			}
		}
		l, err := lockDataDir(lockDir)
		if err != nil {
			return nil, err
		}
		c.lock = l
	}
	if err := c.useTLS(o.TLS, host); err != nil {
		c.Shutdown()
		return nil, err
	}
	var routes []*url.URL
	for _, p := range o.RoutePorts {
		routes = append(routes, &url.URL{Scheme: "nats-route", User: routeUser, Host: net.JoinHostPort(host, strconv.Itoa(p))})
	}
	for i := range n {
		for _, p := range []int{o.ClientPorts[i], o.RoutePorts[i]} {
			if o.Node > 0 && i != o.Node-1 {
				break // another process's ports
			}
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
			if err != nil {
				c.Shutdown()
				return nil, fmt.Errorf("cannot listen on %s: %v (stop the other process or pass other ports)", net.JoinHostPort(host, strconv.Itoa(p)), err)
			}
			l.Close()
		}
		nodeName := fmt.Sprintf("n%d", i+1)
		nd := &clusterNode{opts: server.Options{
			ServerName: nodeName,
			Host:       host, Port: o.ClientPorts[i],
			JetStream:    true,
			StoreDir:     filepath.Join(o.DataDir, nodeName),
			MaxPayload:   MaxPayload,
			SyncAlways:   o.Sync.Always(),
			SyncInterval: o.Sync.Interval,
			Cluster:      server.ClusterOpts{Name: name, Host: host, Port: o.RoutePorts[i]},
			Routes:       routes,
			NoLog:        true, NoSigs: true,
		}}
		if o.Auth != nil {
			if err := trust(&nd.opts, o.Auth); err != nil {
				c.Shutdown()
				return nil, err
			}
			nd.opts.Cluster.Username = routeUser.Username()
			nd.opts.Cluster.Password, _ = routeUser.Password()
		}
		c.nodes = append(c.nodes, nd)
	}
	if o.Node > 0 {
		if err := c.Start(o.Node - 1); err != nil {
			c.Shutdown()
			return nil, err
		}
		return c, nil
	}
	for i := range c.nodes {
		if err := c.Start(i); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.WaitMetaLeader(60 * time.Second); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// Len is the number of nodes, running or not.
func (c *Cluster) Len() int { return len(c.nodes) }

// Name is node i's server name (n1, n2, ...).
func (c *Cluster) Name(i int) string { return c.nodes[i].opts.ServerName }

// URL is node i's client URL, known while it is stopped too.
func (c *Cluster) URL(i int) string {
	o := c.nodes[i].opts
	return c.scheme() + "://" + net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
}

// URLs lists every node's client URL, for nats.Connect.
func (c *Cluster) URLs() string {
	us := make([]string, len(c.nodes))
	for i := range c.nodes {
		us[i] = c.URL(i)
	}
	return strings.Join(us, ",")
}

// DataDir is node i's JetStream store.
func (c *Cluster) DataDir(i int) string { return c.nodes[i].opts.StoreDir }

// Server is node i's running server (nil while stopped).
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].ns
}

// Start starts node i again (or the first time) with its ports and store.
func (c *Cluster) Start(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[i]
	if nd.ns != nil {
		return nil
	}
	opts := nd.opts
	c.nodeOptions(&opts)
	ns, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("start node %s: %v", nd.opts.ServerName, err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return fmt.Errorf("node %s on %s did not become ready within 30s", nd.opts.ServerName, c.URL(i))
	}
	nd.ns = ns
	return nil
}

// Stop shuts node i down (what a crashed node looks like to the others:
// its routes and client connections close).
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	ns := c.nodes[i].ns
	c.nodes[i].ns = nil
	c.mu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// Wipe removes stopped node i's JetStream store, as if its disk were
// replaced: when it starts again it must catch up from its peers.
func (c *Cluster) Wipe(i int) error {
	if c.Server(i) != nil {
		return fmt.Errorf("node %s is running: stop it before wiping its data", c.Name(i))
	}
	return os.RemoveAll(c.nodes[i].opts.StoreDir)
}

// running returns the running servers by node index.
func (c *Cluster) running() map[int]*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]*server.Server{}
	for i, nd := range c.nodes {
		if nd.ns != nil {
			out[i] = nd.ns
		}
	}
	return out
}

// MetaLeader is the index of the node that leads the JetStream meta
// group, or -1 while there is none.
func (c *Cluster) MetaLeader() int {
	for i, s := range c.running() {
		if s.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// StreamLeader is the index of the node that leads stream (a KV bucket's
// stream is KV_<bucket>), or -1 while there is none.
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.running() {
		if s.JetStreamIsStreamLeader(c.account, stream) {
			return i
		}
	}
	return -1
}

// WaitMetaLeader waits until exactly one running node leads the meta group,
// every running node is current with it and, with auth, has JetStream on for
// the deployment's account: a node that has not loaded the account yet
// answers "JetStream not enabled for account" to the first request it
// forwards. The leader can still move after a first election, so callers
// that create streams retry.
func (c *Cluster) WaitMetaLeader(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		leaders, current := 0, true
		for _, s := range c.running() {
			if s.JetStreamIsLeader() {
				leaders++
			}
			if !s.JetStreamIsCurrent() || !c.accountReady(s) {
				current = false
			}
		}
		if leaders == 1 && current {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster has no JetStream meta leader after %v", within)
		}
		time.Sleep(50 * time.Millisecond) // polling the servers' own state: there is no event to wait on
	}
}

// accountReady reports whether s has JetStream enabled for the deployment's
// account (always true without auth, where every client is in $G).
func (c *Cluster) accountReady(s *server.Server) bool {
	if c.account == "" {
		return true
	}
	acc, err := s.LookupAccount(c.account)
	return err == nil && acc.JetStreamEnabled()
}

// Shutdown stops every node and releases the data-dir lock.
func (c *Cluster) Shutdown() {
	for i := range c.nodes {
		c.Stop(i)
	}
	if c.lock != nil {
		_ = c.lock.Unlock()
		c.lock = nil
	}
}

// StreamState is what one node holds of a stream.
type StreamState struct {
	Msgs, FirstSeq, LastSeq uint64
}

// StreamStates reads the state of every stream node i holds, from its own
// store (not the leader's): how a test sees whether a node caught up.
func (c *Cluster) StreamStates(i int) (map[string]StreamState, error) {
	s := c.Server(i)
	if s == nil {
		return nil, fmt.Errorf("node %s is stopped", c.Name(i))
	}
	jsz, err := s.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return nil, err
	}
	out := map[string]StreamState{}
	for _, a := range jsz.AccountDetails {
		for _, st := range a.Streams {
			out[st.Name] = StreamState{Msgs: st.State.Msgs, FirstSeq: st.State.FirstSeq, LastSeq: st.State.LastSeq}
		}
	}
	return out, nil
}

// routeUserName is the user the nodes' routes authenticate as.
const routeUserName = "sessionbus-route"

// UpdateAccount is Server.UpdateAccount on every running node; a stopped
// node gets it when it starts again (its resolver keeps it).
func (c *Cluster) UpdateAccount(accountJWT string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.nodes {
		ns := nd.ns
		if ns == nil {
			if res, ok := nd.opts.AccountResolver.(*server.MemAccResolver); ok && c.auth != nil {
				ac, err := jwt.DecodeAccountClaims(accountJWT)
				if err != nil {
					return fmt.Errorf("update account: %v", err)
				}
				if err := res.Store(ac.Subject, accountJWT); err != nil {
					return err
				}
			}
			continue
		}
		if err := updateAccount(ns, c.auth, accountJWT); err != nil {
			return err
		}
	}
	return nil
}

// Deployment is the deployment the nodes trust, nil without auth.
func (c *Cluster) Deployment() *auth.Deployment { return c.auth }

// Account is the server-side account name where the deployment's streams
// live (what a server's Jsz and stream-leader queries take).
func (c *Cluster) Account() string { return c.account }

// StartLoopbackCluster starts n nodes on free loopback ports (client and
// route), each storing under dir/n<i+1>: the cluster tests and the load
// bench start. A port found free can be taken by another process before
// the node binds it (on a busy machine running tests in parallel, it is):
// a start that fails is tried again on fresh ports, twice, in a fresh
// subdirectory so no half-started node's store is reused. d, when not
// nil, runs them with auth (ClusterOptions.Auth).
func StartLoopbackCluster(dir, name string, n int, sync Sync, d *auth.Deployment) (*Cluster, error) {
	var err error
	for attempt := range 3 {
		o := ClusterOptions{DataDir: dir, Name: name, NoLock: true, Sync: sync, Auth: d}
		if attempt > 0 {
			o.DataDir = filepath.Join(dir, fmt.Sprintf("retry%d", attempt))
		}
		if o.ClientPorts, o.RoutePorts, err = freeLoopbackPorts(n); err != nil {
			return nil, err
		}
		var c *Cluster
		if c, err = StartCluster(o); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// freeLoopbackPorts finds n client and n route ports free on loopback now.
func freeLoopbackPorts(n int) (clients, routes []int, err error) {
	for range 2 * n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("no free loopback port for a cluster node: %v", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if len(clients) < n {
			clients = append(clients, p)
		} else {
			routes = append(routes, p)
		}
	}
	return clients, routes, nil
}
