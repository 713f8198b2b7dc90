// Package embedded runs nats-server inside the sessionbus process, for
// `serve`, the benchmarks and tests. It is the only package that links the
// server: workers, gateways and every client package speak to a server over
// a connection and never import it.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gofrs/flock"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// Options configure the embedded nats-server that `serve` runs.
type Options struct {
	DataDir string // JetStream store and operator credentials live here
	Listen  string // host:port; port 0 or -1 picks a free port
	// Sync is when the file store flushes writes; the zero value flushes
	// every write before acknowledging it (see Sync).
	Sync Sync
	// SyncAlways is the older form of Sync == AlwaysSync, kept so callers
	// written before Sync existed still ask for what they meant.
	SyncAlways bool
	Name       string
	// Auth, when set, runs the server in operator mode trusting this
	// deployment's accounts: every connection then needs a user's
	// credentials and gets that user's permissions (see bus/auth).
	Auth *auth.Deployment
	// TLS, when set, requires TLS on the client port.
	TLS *TLS
	// ResetStore removes the JetStream store (DataDir/jetstream) once the
	// data-dir lock is held, before the server starts: serve --demo's
	// start over. Under the lock, so a serve still using the dir keeps it.
	ResetStore bool
}

// MaxPayload is the embedded server's max_payload. Clients learn it when
// they connect and refuse a larger message before sending it, so such a
// request never reaches the server, is never buffered there, and cannot
// starve the requests behind it (at 8 MiB, four clients sending near the
// limit made good requests time out). It is four times the largest tool
// request (bus.MaxRequestBytes, refused with a 413 by the worker above
// that) because the system's own messages are bigger than any one input: an
// agent-to-agent step's run request carries the original message and two
// replies, each up to a transcript entry (1 MiB).
const MaxPayload = 4 * bus.MaxRequestBytes

// Server is a running embedded nats-server holding the data-dir lock.
type Server struct {
	NS   *server.Server
	lock *flock.Flock
	opts Options
}

// Start starts nats-server with JetStream on opts.DataDir. Each way it
// can fail (dir in use, not writable, port taken) gets one line that says what
// to change.
func Start(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("no data dir: pass --data DIR")
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s is not usable: %v (pass a writable --data DIR)", opts.DataDir, err)
	}
	probe := filepath.Join(opts.DataDir, ".write-test")
	if err := os.WriteFile(probe, []byte("ok"), 0o600); err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %v (pass a writable --data DIR)", opts.DataDir, err)
	}
	_ = os.Remove(probe)
	lock, err := lockDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	if opts.ResetStore {
		if err := os.RemoveAll(filepath.Join(opts.DataDir, "jetstream")); err != nil {
			_ = lock.Unlock()
			return nil, fmt.Errorf("remove the store %s: %v (check its permissions)", filepath.Join(opts.DataDir, "jetstream"), err)
		}
	}
	host, port, err := splitListen(opts.Listen)
	if err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	if port > 0 {
		// nats-server reports a taken port only in its log; check first so the
		// user gets a clear line instead of a silent readiness timeout.
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			_ = lock.Unlock()
			return nil, fmt.Errorf("cannot listen on %s: %v (stop the other process or pass another --listen)", net.JoinHostPort(host, strconv.Itoa(port)), err)
		}
		l.Close()
	}
	name := opts.Name
	if name == "" {
		name = "sessionbus"
	}
	sopts := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(opts.DataDir, "jetstream"),
		MaxPayload: MaxPayload,
		NoLog:      true,
		NoSigs:     true,
	}
	if opts.SyncAlways || opts.Sync.Always() {
		sopts.SyncAlways = true
	} else {
		sopts.SyncInterval = opts.Sync.Interval
	}
	if opts.Auth != nil {
		if err := trust(sopts, opts.Auth); err != nil {
			_ = lock.Unlock()
			return nil, err
		}
	}
	if opts.TLS != nil {
		if err := opts.TLS.apply(sopts); err != nil {
			_ = lock.Unlock()
			return nil, err
		}
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		_ = lock.Unlock()
		return nil, fmt.Errorf("start nats-server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		_ = lock.Unlock()
		return nil, fmt.Errorf("nats-server on %s did not become ready within 30s", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return &Server{NS: ns, lock: lock, opts: opts}, nil
}

// Deployment is the deployment the server trusts, nil without auth.
func (s *Server) Deployment() *auth.Deployment { return s.opts.Auth }

// URL is the client URL (nats://host:port, tls://host:port with TLS).
func (s *Server) URL() string { return s.NS.ClientURL() }

// Connect opens a client connection to this server from inside the
// process, with no TCP socket in between: what `serve` gives its own worker
// and gateway (a send costs about a quarter less CPU than over loopback).
// The connection still reports the server's TCP URL as its ConnectedUrl,
// which is the address handed to processes a gateway starts (its nats://
// form when the port requires TLS: see inProcessURL).
func (s *Server) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(s.inProcessURL(), append([]nats.Option{nats.Name(name), nats.InProcessServer(s.NS)}, opts...)...)
}

// Shutdown stops the server and releases the data-dir lock.
func (s *Server) Shutdown() {
	s.NS.Shutdown()
	s.NS.WaitForShutdown()
	if s.lock != nil {
		_ = s.lock.Unlock()
		s.lock = nil
	}
}

func splitListen(listen string) (string, int, error) {
	if listen == "" {
		listen = "127.0.0.1:4222"
	}
	host, ps, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("--listen %q is not host:port: %v", listen, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("--listen %q: port must be a number from 0 to 65535", listen)
	}
	if port == 0 {
		port = -1
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host, port, nil
}

// lockDataDir takes an exclusive lock on DIR/serve.lock (flock on Unix,
// LockFileEx on Windows), so a second `serve` on the same data dir fails at
// once instead of corrupting the JetStream store. The holder's pid is
// written beside it, for the message the second one prints.
func lockDataDir(dir string) (*flock.Flock, error) {
	l := flock.New(filepath.Join(dir, "serve.lock"))
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %v (pass a writable --data DIR)", dir, err)
	}
	pidFile := filepath.Join(dir, "serve.pid")
	if !ok {
		holder := ""
		if pid, _ := os.ReadFile(pidFile); len(pid) > 0 {
			holder = " (pid " + string(pid) + ")"
		}
		return nil, fmt.Errorf("data dir %s is in use by another sessionbus serve%s: stop it or pass another --data DIR", dir, holder)
	}
	_ = os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o600)
	return l, nil
}

// trust sets operator mode: the deployment's operator JWT, its system
// account, and its accounts preloaded into a memory resolver, the same
// settings auth.Deployment.ServerConfig writes for an external server.
func trust(sopts *server.Options, d *auth.Deployment) error {
	opJWT, err := d.OperatorJWT()
	if err != nil {
		return err
	}
	oc, err := jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		return err
	}
	accts, err := d.AccountJWTs()
	if err != nil {
		return err
	}
	res := &server.MemAccResolver{}
	for pub, a := range accts {
		if err := res.Store(pub, a); err != nil {
			return err
		}
	}
	sopts.TrustedOperators = []*jwt.OperatorClaims{oc}
	sopts.SystemAccount = d.SystemAccount()
	sopts.AccountResolver = res
	return nil
}

// UpdateAccount applies an account JWT to the running server, in process:
// what a push of the account to a server does, without a system-account
// connection. The server closes the connections of users the new claims
// revoke and refuses their new ones. The JWT must be signed by the operator
// the server trusts (Options.Auth) and name an account it knows; the memory
// resolver keeps it too, so a later lookup of the account finds it.
func (s *Server) UpdateAccount(accountJWT string) error {
	return updateAccount(s.NS, s.opts.Auth, accountJWT)
}

// updateAccount applies a new account JWT of d's operator to ns: into its
// memory resolver (a node restarted in this process starts with it) and
// into the running account, whose revocations close live connections.
func updateAccount(ns *server.Server, d *auth.Deployment, accountJWT string) error {
	if d == nil {
		return errors.New("update account: this server runs without NATS auth")
	}
	ac, err := jwt.DecodeAccountClaims(accountJWT)
	if err != nil {
		return fmt.Errorf("update account: %v", err)
	}
	if ac.Issuer != d.OperatorKey() {
		return fmt.Errorf("update account %s: signed by %s, not the trusted operator", ac.Subject, ac.Issuer)
	}
	acc, err := ns.LookupAccount(ac.Subject)
	if err != nil {
		return fmt.Errorf("update account %s: %v", ac.Subject, err)
	}
	if res := ns.AccountResolver(); res != nil {
		if err := res.Store(ac.Subject, accountJWT); err != nil {
			return fmt.Errorf("update account %s: %v", ac.Subject, err)
		}
	}
	ns.UpdateAccountClaims(acc, ac)
	return nil
}
