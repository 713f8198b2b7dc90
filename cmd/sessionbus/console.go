package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/ops/console"
)

// cmdConsole serves the web console against a running bus.
func cmdConsole(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("console", stderr)
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "the admin's credentials with the token key (DATA/operator.creds): the console reads the buckets and mints caller tokens")
	listen := fs.String("listen", console.DefaultListen, "HTTP address of the console (host:port); a non-loopback one needs a bus with auth")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	stuck := fs.Duration("stuck", 0, "the ops page lists a run as stuck after this long (0: inspect's default, 15m)")
	metricsFrom := fs.String("metrics-from", "", "comma-separated /metrics addresses (host:port, as given to --metrics) of workers and gateways whose figures the operations page charts")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	open := fs.Bool("open", false, "print a one-time sign-in link for --role (nobody pastes a credentials file): it logs one browser in, once, within --link-ttl")
	linkRole := fs.String("role", "admin", "the role a sign-in link (--open) logs in as: admin (to act) or ops (to look)")
	linkTTL := fs.Duration("link-ttl", console.DefaultLinkTTL, "how long a sign-in link (--open) may be used")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *linkRole != "admin" && *linkRole != "ops" {
		fmt.Fprintf(stderr, "sessionbus console: --role %q: give admin (to act) or ops (to look)\n", *linkRole)
		return 2
	}
	if *linkTTL <= 0 {
		fmt.Fprintf(stderr, "sessionbus console: --link-ttl %v: give a positive duration such as 10m\n", *linkTTL)
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "sessionbus console: unexpected argument %q (it takes flags only)\n", fs.Arg(0))
		return 2
	}
	sigs, release := catchStop()
	defer release()
	log := newLogger(stderr, *logLevel)
	role, err := auth.RoleOf(*creds)
	if err != nil {
		_ = failLine(stderr, "console", err)
		return 1
	}
	if role != "" && role != auth.RoleAdmin {
		_ = failLine(stderr, "console", fmt.Errorf("credentials %s are the %s role's: the console needs the admin role's with the token key (DATA/operator.creds); people log in to it with ops or admin credentials of their own", *creds, role))
		return 1
	}
	authOn := role != ""
	if !authOn && !console.IsLoopback(*listen) {
		_ = failLine(stderr, "console", console.ErrNotLoopback)
		return 2
	}
	op, err := bus.LoadOperator(*creds)
	if err != nil {
		_ = failLine(stderr, "console", fmt.Errorf("%v (the console needs the admin role's credentials with the token key)", err))
		return 1
	}
	data, _ := os.ReadFile(*creds)
	nc, err := server.connect("sessionbus console", credsOptions(*creds)...)
	if err != nil {
		_ = failLine(stderr, "console", err)
		return 1
	}
	defer closeConn(nc)
	c, err := startConsole(console.Options{Conn: nc, Operator: op, Names: bus.NewNames(*prefix), Listen: *listen, Auth: authOn,
		Account: console.AccountOf(data), StuckAfter: *stuck, MetricsFrom: splitList(*metricsFrom), Log: log})
	if err != nil {
		_ = failLine(stderr, "console", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintln(stdout, "console", c.URL())
	if *open {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		link, err := c.SignInLink(ctx, *linkRole, *linkTTL)
		cancel()
		if err != nil {
			_ = failLine(stderr, "console", err)
			return 1
		}
		fmt.Fprintf(stdout, "sign-in %s (%s, once, within %v)\n", link, *linkRole, *linkTTL)
	}
	<-sigs
	return 0
}

// startConsole gives the console's start (its indexes' first load) a
// bounded time.
func startConsole(o console.Options) (*console.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return console.Start(ctx, o)
}

// splitList is a comma-separated flag's items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
