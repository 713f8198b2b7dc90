package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/ops/home"
)

// fallbackServer is --server's default when neither SESSIONBUS_SERVER nor
// a client config in the home names one: serve's default --listen.
const fallbackServer = "nats://127.0.0.1:4222"

// defaultData is --data's default: the home (home.Resolve), so serve and
// every client command agree on it from any folder.
func defaultData() string { return home.Resolve().Dir }

// homeClient is the client config the last server on the home wrote (the
// zero value when there is none; `sessionbus home` reports a broken one).
func homeClient() (home.Home, home.Client) {
	h := home.Resolve()
	c, _, _ := home.ReadClient(h.Dir)
	return h, c
}

// defaultCreds is --creds' default: SESSIONBUS_CREDS, else the operator
// file the home's client config names, else the one serve writes there.
func defaultCreds() string {
	if v := os.Getenv("SESSIONBUS_CREDS"); v != "" {
		return v
	}
	h, c := homeClient()
	if p := c.Creds[home.Operator]; p != "" {
		return p
	}
	return filepath.Join(h.Dir, bus.CredsFile)
}

// defaultServer is --server's default: SESSIONBUS_SERVER, else the URL
// the home's client config names, else serve's default address.
func defaultServer() string {
	if v := os.Getenv("SESSIONBUS_SERVER"); v != "" {
		return v
	}
	if _, c := homeClient(); c.Server != "" {
		return c.Server
	}
	return fallbackServer
}

// roleCredsPath is where ROLE's credentials file is for client use: the
// home's client config, else where serve writes it.
func roleCredsPath(role string) string {
	if role == home.Operator {
		return defaultCreds()
	}
	h, c := homeClient()
	if p := c.Creds[role]; p != "" {
		return p
	}
	return filepath.Join(h.Dir, "creds", role+".creds")
}

// writeClientConfig records, in the data dir a server now holds, the URL
// its clients connect to and each role's credentials file (with auth;
// without, only the token key's file).
func writeClientConfig(dataDir, url, by string, authOn bool) error {
	c := home.Client{Server: url, WrittenBy: by, Creds: map[string]string{home.Operator: filepath.Join(dataDir, bus.CredsFile)}}
	if authOn {
		for _, r := range auth.Roles {
			c.Creds[string(r)] = filepath.Join(dataDir, "creds", string(r)+".creds")
		}
	}
	return home.WriteClient(dataDir, c)
}

// homeFree are the commands that never read the home.
var homeFree = []string{"version", "schema", "completion", "init", "help", "-h", "--help"}

// noteHome says, on stderr and before the command runs, when the home is
// not the usual one (./sessionbus-data found in this folder): commands run
// from another folder would use another data dir. Not for commands that
// never read it, nor with --data, -h or --help on the command line.
func noteHome(cmd string, args []string, stderr io.Writer) {
	if slices.Contains(homeFree, cmd) {
		return
	}
	for _, a := range args {
		a, _, _ = strings.Cut(a, "=")
		if a == "--data" || a == "-data" || a == "-h" || a == "--help" {
			return
		}
	}
	if n := home.Resolve().Note(); n != "" {
		fmt.Fprintln(stderr, "sessionbus:", n)
	}
}

// cmdHome prints where this machine's sessionbus state is: the data dir,
// a role's credentials file, or the server URL client commands use.
func cmdHome(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("home", stderr)
	role := fs.String("role", "", "print this role's credentials file instead (agent, adapter, worker, gateway, ops, admin; operator: the file commands use by default)")
	url := fs.Bool("url", false, "print the server URL client commands connect to by default instead")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *role != "" && *url {
		fs.Usage()
		return 2
	}
	h := home.Resolve()
	if _, _, err := home.ReadClient(h.Dir); err != nil {
		_ = failLine(stderr, "home", err)
		return 1
	}
	switch {
	case *url:
		fmt.Fprintln(stdout, defaultServer())
	case *role == home.Operator:
		fmt.Fprintln(stdout, defaultCreds())
	case *role != "":
		r, err := auth.ParseRole(*role)
		if err != nil {
			_ = failLine(stderr, "home", fmt.Errorf("--role: %v (or operator)", err))
			return 2
		}
		fmt.Fprintln(stdout, roleCredsPath(string(r)))
	default:
		fmt.Fprintln(stdout, h.Dir)
	}
	return 0
}

// sameDir reports whether two paths name the same dir (both made
// absolute; a dir that does not exist yet compares by its path).
func sameDir(a, b string) bool {
	if sa, err := os.Stat(a); err == nil {
		if sb, err := os.Stat(b); err == nil {
			return os.SameFile(sa, sb)
		}
	}
	aa, erra := filepath.Abs(a)
	ab, errb := filepath.Abs(b)
	return erra == nil && errb == nil && aa == ab
}
