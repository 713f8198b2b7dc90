package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/ops/supervise"
)

// upDeployment is what `sessionbus up` runs: the shape of a deployment on
// one machine, every role a process of its own.
type upDeployment struct {
	nodes, workers, gateways int
	indexers                 int
	data, listen, cfgPath    string
	logLevel                 string
	console                  string // the web console's address, "" none
	grace                    time.Duration
	exe                      string // this binary, re-run for every child
	urls                     []string
	cfg                      *config.Config
}

// upStartWithin bounds each child's start: a worker creates the streams
// and buckets, replicated, on a cluster that may still settle.
const upStartWithin = 2 * time.Minute

func cmdUp(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("up", stderr)
	u := upDeployment{}
	fs.IntVar(&u.nodes, "nodes", 3, "cluster nodes, each a process of its own (odd, 3 or more); streams and buckets are created R3")
	fs.IntVar(&u.workers, "workers", 2, "tool worker processes (1 or more)")
	fs.IntVar(&u.gateways, "gateways", 2, "gateway processes (0 or more)")
	fs.IntVar(&u.indexers, "indexers", 1, "transcript search indexers (0 or more), each with its own index file DATA/search/indexerN.db")
	fs.StringVar(&u.data, "data", defaultData(), "data dir: the nodes' stores (DIR/n1..nN), the credentials and the client config")
	fs.StringVar(&u.listen, "listen", "127.0.0.1:4222", "first node's client address, on loopback (node i listens on port+i-1, its route 2000 above)")
	fs.StringVar(&u.cfgPath, "config", "", "config file every process reads (default: ./sessionbus.yaml or .json if present)")
	fs.StringVar(&u.logLevel, "log-level", "info", "every process's log level: debug, info, warn or error")
	fs.StringVar(&u.console, "console", "", "also run the web console, a process of its own with the admin's credentials, on this address (e.g. 127.0.0.1:4280)")
	grace := shutdownGraceFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	u.grace = *grace
	host, port, err := u.check(fs.NArg())
	if err != nil {
		_ = failLine(stderr, "up", err)
		return 2
	}
	// SIGINT and SIGTERM stop the children in order; they run in process
	// groups of their own, so a Ctrl-C reaches only this process.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log, cfg, err := commandSetup("up", u.cfgPath, u.logLevel, stderr)
	if err != nil {
		return 1
	}
	u.cfg = cfg
	if u.exe, err = os.Executable(); err != nil {
		_ = failLine(stderr, "up", fmt.Errorf("find this binary to start its processes: %v", err))
		return 1
	}
	for i := range u.nodes {
		u.urls = append(u.urls, "nats://"+hostPort(host, port+i))
	}
	d, op, err := clusterDeployment(u.data, true)
	if err == nil {
		err = publishDeployment(u.data, strings.Join(u.urls, ","), "up", cfg.Bus.Prefix, d, op)
	}
	if err != nil {
		_ = failLine(stderr, "up", err)
		return 1
	}
	g := supervise.New(stderr, u.grace+30*time.Second)
	if err := u.start(ctx, g, log); err != nil {
		stopErr := g.Stop()
		if ctx.Err() != nil && stopErr == nil {
			return 0 // stopped while starting: everything is down
		}
		_ = failLine(stderr, "up", err)
		return 1
	}
	fmt.Fprintln(stdout, "ready", strings.Join(u.urls, ","))
	policy := supervise.DefaultPolicy
	policy.StartWithin, policy.Log = upStartWithin, log
	code := 0
	if err := g.Supervise(ctx, policy); err != nil {
		_ = failLine(stderr, "up", fmt.Errorf("%v: stopping the rest", err))
		code = 1
	} else {
		log.Info("stopping", "processes", len(g.Names()))
	}
	restarts := 0
	for _, n := range g.Restarts() {
		restarts += n
	}
	if err := g.Stop(); err != nil {
		_ = failLine(stderr, "up", err)
		code = 1
	}
	log.Info("every process stopped", "restarts", restarts)
	return code
}

// check refuses a command line that cannot work: n is the number of
// positional arguments (none).
func (u upDeployment) check(n int) (host string, port int, err error) {
	if n != 0 {
		return "", 0, fmt.Errorf("up takes flags only: see sessionbus up -h")
	}
	if u.indexers < 0 {
		return "", 0, fmt.Errorf("--indexers %d: run 0 or more search indexers", u.indexers)
	}
	if u.workers < 1 || u.gateways < 0 {
		return "", 0, fmt.Errorf("--workers %d --gateways %d: run 1 or more workers (they answer the tools) and 0 or more gateways", u.workers, u.gateways)
	}
	if !loopbackListen(u.listen) {
		return "", 0, fmt.Errorf("--listen %s: up runs a deployment on this machine, on loopback; across hosts run each role as a service (examples/deploy/, docs/ops.md#deploy)", u.listen)
	}
	host, port, err = clusterServe{nodes: u.nodes, listen: u.listen}.check()
	if err != nil {
		err = fmt.Errorf("%s", strings.ReplaceAll(err.Error(), "--cluster", "--nodes"))
	}
	return host, port, err
}

// start starts the nodes, waits for their meta leader and, on a data dir
// that has streams, for each stream's leader, then the workers,
// then the gateways, and checks each node answers sessions_list.
func (u upDeployment) start(ctx context.Context, g *supervise.Group, log *slog.Logger) error {
	start := func(p supervise.Proc) error {
		if err := g.Start(ctx, p, upStartWithin); err != nil {
			return err
		}
		// the pid names the process to an operator (or a test) that kills it
		log.Info("process ready", "process", p.Name, "pid", g.Pid(p.Name))
		return nil
	}
	for _, p := range u.nodeProcs() {
		if err := start(p); err != nil {
			return err
		}
	}
	if err := u.waitCluster(ctx, log); err != nil {
		return err
	}
	log.Info("cluster up", "nodes", u.nodes, "urls", strings.Join(u.urls, ","))
	for _, p := range u.roleProcs() {
		if err := start(p); err != nil {
			return err
		}
	}
	return u.checkNodes(ctx)
}

// nodeProcs are the cluster's nodes: serve --cluster N --node I.
func (u upDeployment) nodeProcs() []supervise.Proc {
	var out []supervise.Proc
	for i := 1; i <= u.nodes; i++ {
		args := []string{"serve", "--cluster", strconv.Itoa(u.nodes), "--node", strconv.Itoa(i),
			"--data", u.data, "--listen", u.listen, "--log-level", u.logLevel}
		out = append(out, supervise.Proc{Name: fmt.Sprintf("n%d", i), Path: u.exe, Args: u.withConfig(args), Ready: "ready"})
	}
	return out
}

// roleProcs are the workers, then the gateways and the search indexers, each with its role's
// credentials and every node's URL.
func (u upDeployment) roleProcs() []supervise.Proc {
	server := strings.Join(u.urls, ",")
	creds := func(role string) string { return filepath.Join(u.data, "creds", role+".creds") }
	var env []string
	if os.Getenv("SESSIONBUS_BUS_REPLICAS") == "" && u.cfg.Bus.Replicas == 1 {
		// a cluster's streams and buckets survive a node, as serve --cluster makes them
		env = append(env, "SESSIONBUS_BUS_REPLICAS=3")
	}
	var out []supervise.Proc
	for i := 1; i <= u.workers; i++ {
		args := []string{"worker", "--server", server, "--creds", creds("worker"), "--log-level", u.logLevel, "--shutdown-grace", u.grace.String()}
		out = append(out, supervise.Proc{Name: fmt.Sprintf("worker%d", i), Path: u.exe, Args: u.withConfig(args), Env: env, Ready: "ready"})
	}
	for i := 1; i <= u.gateways; i++ {
		args := []string{"gateway", "--server", server, "--creds", creds("gateway"), "--id", fmt.Sprintf("gw%d", i), "--log-level", u.logLevel}
		out = append(out, supervise.Proc{Name: fmt.Sprintf("gw%d", i), Path: u.exe, Args: u.withConfig(args), Env: env, Ready: "ready"})
	}
	for i := 1; i <= u.indexers; i++ {
		// after the workers, which create the transcript stream it follows
		args := []string{"indexer", "--server", server, "--creds", creds("worker"), "--log-level", u.logLevel,
			"--index", filepath.Join(u.data, "search", fmt.Sprintf("indexer%d.db", i))}
		out = append(out, supervise.Proc{Name: fmt.Sprintf("indexer%d", i), Path: u.exe, Args: u.withConfig(args), Env: env, Ready: "ready"})
	}
	if u.console != "" {
		// the console mints caller tokens, so it runs with the admin's
		// credentials and the token key; it prints "console URL" once up
		args := []string{"console", "--server", server, "--creds", filepath.Join(u.data, "operator.creds"),
			"--listen", u.console, "--log-level", u.logLevel, "--prefix", u.cfg.Bus.Prefix}
		out = append(out, supervise.Proc{Name: "console", Path: u.exe, Args: args, Ready: "console "})
	}
	return out
}

// withConfig adds --config when up was given one.
func (u upDeployment) withConfig(args []string) []string {
	if u.cfgPath == "" {
		return args
	}
	return append(args, "--config", u.cfgPath)
}

// waitCluster waits until the cluster has a JetStream meta leader (an
// account info request succeeds), so the first worker can create its
// replicated streams, and, on a data dir that has streams already, until
// each of them has a leader again: until then a worker's or gateway's
// request about such a stream goes unanswered.
func (u upDeployment) waitCluster(ctx context.Context, log *slog.Logger) error {
	nc, err := connect(strings.Join(u.urls, ","), "sessionbus up", credsOptions(filepath.Join(u.data, bus.CredsFile))...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	err = retry(ctx, time.Minute, "the cluster to elect a JetStream leader", func(ctx context.Context) error {
		_, err := js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		return err
	}
	return waitLeaders(ctx, js, upStartWithin, log)
}

// waitLeaders waits until every stream (a bucket is one too) has a
// leader, saying on the log every few seconds which ones still have none.
func waitLeaders(ctx context.Context, js jetstream.JetStream, within time.Duration, log *slog.Logger) error {
	began := time.Now()
	var said time.Time
	for {
		total, missing, err := leaderless(ctx, js)
		if err == nil && len(missing) == 0 {
			log.Info("streams have leaders", "streams", total, "waited", time.Since(began).Round(time.Millisecond))
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%d of %d have none: %s", len(missing), total, strings.Join(missing, ", "))
		}
		if time.Since(began) > within {
			return fmt.Errorf("waited %v for the streams' leaders: %v", within, err)
		}
		if time.Since(said) >= 5*time.Second {
			log.Info("waiting for the streams' leaders", "status", err.Error())
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond): // back off before the next look
		}
	}
}

// leaderless lists the streams and those of them with no leader now. Each
// request has a short bound of its own: a stream without a leader leaves
// its info request unanswered.
func leaderless(ctx context.Context, js jetstream.JetStream) (total int, missing []string, err error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	names := js.StreamNames(lctx)
	var all []string
	for n := range names.Name() {
		all = append(all, n)
	}
	if err := names.Err(); err != nil {
		return 0, nil, fmt.Errorf("list the streams: %w", err)
	}
	for _, n := range all {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := js.Stream(ictx, n)
		cancel()
		if err != nil || st.CachedInfo().Cluster == nil || st.CachedInfo().Cluster.Leader == "" {
			missing = append(missing, n)
		}
	}
	return len(all), missing, nil
}

// checkNodes calls sessions_list through each node's client port: every
// node routes to the workers, whichever node they connected to.
func (u upDeployment) checkNodes(ctx context.Context) error {
	op, err := bus.LoadOperator(filepath.Join(u.data, bus.CredsFile))
	if err != nil {
		return err
	}
	tok, err := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Minute)
	if err != nil {
		return err
	}
	for _, url := range u.urls {
		nc, err := connect(url, "sessionbus up check", append(credsOptions(filepath.Join(u.data, bus.CredsFile)), nats.MaxReconnects(0))...)
		if err != nil {
			return err
		}
		err = retry(ctx, time.Minute, "sessions_list through "+url, func(ctx context.Context) error {
			_, err := bus.Call(ctx, nc, bus.NewNames(u.cfg.Bus.Prefix), tok, "sessions_list", []byte(`{}`))
			return err
		})
		nc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// retry calls f until it succeeds, ctx ends, or within passes (then its
// last error says what did not happen).
func retry(ctx context.Context, within time.Duration, what string, f func(context.Context) error) error {
	deadline := time.Now().Add(within)
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v for %s: %v", within, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond): // back off before the next attempt
		}
	}
}

// hostPort joins a host and a port.
func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}
