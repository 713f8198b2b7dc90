package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// cmdCreds mints credentials for an external server or cluster.
func cmdCreds(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("creds", stderr)
	data := fs.String("data", defaultData(), "dir holding the keys (DIR/nats-auth) and the caller-token key (DIR/operator.creds)")
	account := fs.String("account", auth.DefaultAccount, "NATS account (one per tenant); with --server-config a comma-separated list to create")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix of the deployment (bus.prefix)")
	name := fs.String("name", "", "user name shown in the server's connection list (default: the role)")
	expiry := fs.Duration("expiry", 0, "the credentials expire after this long (0: never)")
	out := fs.String("out", "", "write the file here (mode 0600) instead of stdout")
	serverConfig := fs.Bool("server-config", false, "print the nats-server config block (operator, system account, accounts)")
	inboxOf := fs.String("inbox-of", "", "print the inbox prefix the user in this credentials file may subscribe to")
	channel := fs.String("channel", "", "with ROLE adapter: the one channel it serves (its deliveries, and only the SB_DELIVER consumer named for it); unset: every channel")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *inboxOf != "" {
		inbox, err := auth.InboxOf(*inboxOf)
		if err != nil {
			_ = failLine(stderr, "creds", err)
			return 1
		}
		fmt.Fprintln(stdout, inbox)
		return 0
	}
	if *serverConfig {
		if fs.NArg() != 0 {
			fs.Usage()
			return 2
		}
		d, err := auth.LoadOrCreate(filepath.Join(*data, auth.Dir), strings.Split(*account, ",")...)
		if err != nil {
			_ = failLine(stderr, "creds", err)
			return 1
		}
		conf, err := d.ServerConfig()
		if err != nil {
			_ = failLine(stderr, "creds", err)
			return 1
		}
		fmt.Fprint(stdout, conf)
		return 0
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	role, err := auth.ParseRole(fs.Arg(0))
	if err != nil {
		_ = failLine(stderr, "creds", err)
		return 2
	}
	if *expiry < 0 {
		_ = failLine(stderr, "creds", fmt.Errorf("--expiry %v is negative: use 0 (never) or more", *expiry))
		return 2
	}
	if *channel != "" {
		if role != auth.RoleAdapter {
			_ = failLine(stderr, "creds", fmt.Errorf("--channel is for the adapter role, not %s", role))
			return 2
		}
		if _, err := bus.NormalizeChannel(*channel); err != nil {
			_ = failLine(stderr, "creds", fmt.Errorf("--channel: %v", err))
			return 2
		}
	}
	d, err := auth.LoadOrCreate(filepath.Join(*data, auth.Dir), *account)
	if err != nil {
		_ = failLine(stderr, "creds", err)
		return 1
	}
	op, err := bus.LoadOrCreateOperator(*data)
	if err != nil {
		_ = failLine(stderr, "creds", err)
		return 1
	}
	var b []byte
	if *channel != "" {
		b, err = adapterCreds(d, *account, *channel, *name, *prefix, *expiry)
	} else {
		b, _, err = roleCreds(d, op, *account, role, *name, *prefix, *expiry)
	}
	if err != nil {
		_ = failLine(stderr, "creds", err)
		return 1
	}
	if *out == "" {
		_, _ = stdout.Write(b)
		return 0
	}
	if err := writeSecret(*out, b); err != nil {
		_ = failLine(stderr, "creds", err)
		return 1
	}
	return 0
}

// roleCreds is a role's credentials file: the NATS user, then what the
// role needs of the caller-token key. Gateways mint run tokens and admin
// mints for `call`, so they carry its seed; a worker only verifies, so it
// carries the issuer's public key; the others carry nothing of it.
func roleCreds(d *auth.Deployment, op *bus.Operator, account string, role auth.Role, name, prefix string, expiry time.Duration) ([]byte, *auth.User, error) {
	u, err := d.Mint(account, role, name, prefix, expiry)
	if err != nil {
		return nil, nil, err
	}
	b, err := u.Creds()
	if err != nil {
		return nil, nil, err
	}
	switch role {
	case auth.RoleGateway, auth.RoleAdmin:
		seed, err := op.Seed()
		if err != nil {
			return nil, nil, err
		}
		b = append(append(b, '\n'), seed...)
	case auth.RoleWorker:
		b = append(b, auth.IssuerBlock(op.PublicKey())...)
	}
	return b, u, nil
}

// adapterCreds is a credentials file for an adapter of one channel.
func adapterCreds(d *auth.Deployment, account, channel, name, prefix string, expiry time.Duration) ([]byte, error) {
	u, err := d.MintAdapter(account, channel, name, prefix, expiry)
	if err != nil {
		return nil, err
	}
	return u.Creds()
}

func writeSecret(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write credentials %s: %v", path, err)
	}
	return os.Rename(tmp, path)
}

// serveAuth finishes `serve` (with auth) once the server runs: one
// credentials file per role in DIR/creds, operator.creds rewritten to hold
// the admin user first (so call, chat and import connect with it by
// default) and the token key after it, and the options serve's own
// connection uses.
func serveAuth(d *auth.Deployment, dataDir, prefix string, op *bus.Operator, log *slog.Logger) ([]nats.Option, error) {
	if err := writeRoleCreds(d, dataDir, prefix, op); err != nil {
		return nil, err
	}
	self, err := d.Mint(auth.DefaultAccount, auth.RoleAdmin, "sessionbus serve", prefix, 0)
	if err != nil {
		return nil, err
	}
	log.Info("NATS auth on: each role's credentials file is in the creds dir; operator.creds is the admin's",
		"dir", filepath.Join(dataDir, "creds"), "roles", fmt.Sprint(auth.Roles), "account", auth.DefaultAccount)
	return self.Options(), nil
}

// writeRoleCreds writes one credentials file per role into DIR/creds, and
// the admin's again as DIR/operator.creds.
func writeRoleCreds(d *auth.Deployment, dataDir, prefix string, op *bus.Operator) error {
	dir := filepath.Join(dataDir, "creds")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creds dir %s: %v", dir, err)
	}
	for _, d := range []string{dir, filepath.Join(dataDir, auth.Dir)} {
		if err := checkPrivateDir(d); err != nil {
			return err
		}
	}
	for _, r := range auth.Roles {
		b, _, err := roleCreds(d, op, auth.DefaultAccount, r, string(r), prefix, 0)
		if err != nil {
			return err
		}
		if err := writeSecret(filepath.Join(dir, string(r)+".creds"), b); err != nil {
			return err
		}
		if r == auth.RoleAdmin {
			if err := writeSecret(filepath.Join(dataDir, bus.CredsFile), b); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadDeployment loads (or first creates) the NATS identities of the
// deployment whose data dir is dataDir.
func loadDeployment(dataDir string) (*auth.Deployment, error) {
	return auth.LoadOrCreate(filepath.Join(dataDir, auth.Dir), auth.DefaultAccount)
}

// selfOptions are serve's own connect options: with d, the credentials
// serveAuth writes (only once this serve holds the data dir); without
// (--insecure), none, and a warning that says the server is open.
func selfOptions(d *auth.Deployment, dataDir, listen, prefix string, op *bus.Operator, log *slog.Logger) ([]nats.Option, error) {
	if d == nil {
		log.Warn("NATS auth is off (--insecure): the server is unauthenticated, and any process that reaches it can read and change every session; drop --insecure to require credentials", "listen", listen)
		return nil, nil
	}
	return serveAuth(d, dataDir, prefix, op, log)
}

// checkPrivateDir refuses a directory of secrets (credentials, NATS keys)
// that others than its owner may read or enter: MkdirAll keeps the mode of
// a directory that exists, so one made readable by hand stays so. Windows
// has no such mode bits.
func checkPrivateDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("secrets dir %s: %v", dir, err)
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("secrets dir %s is open to other users (mode %04o): run `chmod 700 %s` and start again", dir, m, dir)
	}
	return nil
}

// checkListen refuses a non-loopback --listen under --insecure: that would
// serve every transcript to anyone who can reach the port.
func checkListen(listen string, authOn bool) error {
	if authOn || loopbackListen(listen) {
		return nil
	}
	host, _, _ := net.SplitHostPort(listen)
	return fmt.Errorf("--listen %s: %s is not a loopback address, and with --insecure any client that reaches it can read and change every session; drop --insecure (credentials are then required), or listen on 127.0.0.1", listen, host)
}

// checkProcessRole refuses, before connecting, credentials minted for a
// role that cannot run a worker or gateway (agent, adapter, ops): it would
// fail later on the first stream it may not create, with a permission
// error that does not name the file.
func checkProcessRole(what, path string) error {
	r, err := auth.RoleOf(path)
	if err != nil || r == "" || r == auth.RoleWorker || r == auth.RoleGateway || r == auth.RoleAdmin {
		return nil // no file, or one without a NATS user: the connect says what is wrong
	}
	return fmt.Errorf("credentials %s are the %s role's: a %s needs DATA/creds/%s.creds (or the admin's DATA/operator.creds)", path, r, what, what)
}

// credsOptions are the connect options for a command's --creds file: the
// NATS user in it if it has one (a server with auth), else none.
func credsOptions(path string) []nats.Option {
	opts, err := auth.ConnectOptions(path)
	if err != nil {
		// a file that cannot be used fails the connect with its reason
		return []nats.Option{func(*nats.Options) error { return err }}
	}
	return opts
}

// loadIssuer is the token issuer a worker trusts: from the operator seed
// in creds, or the issuer block of a worker's credentials file.
func loadIssuer(path string) (string, error) {
	op, err := bus.LoadOperator(path)
	if err == nil {
		return op.PublicKey(), nil
	}
	b, rerr := os.ReadFile(path)
	if rerr != nil {
		return "", err // LoadOperator's message says what to do
	}
	if pub := auth.FindIssuer(b); pub != "" {
		return pub, nil
	}
	return "", fmt.Errorf("%s holds neither the token key nor its issuer: pass operator.creds, a worker's file (sessionbus creds worker) or --issuer", path)
}
