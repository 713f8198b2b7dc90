package bus

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ServerOptions configure the embedded nats-server that `serve` runs.
type ServerOptions struct {
	DataDir    string // JetStream store and operator credentials live here
	Listen     string // host:port; port 0 or -1 picks a free port
	SyncAlways bool   // fsync every write (slower; default syncs every 2 min like nats-server)
	Name       string
}

// Server is a running embedded nats-server holding the data-dir lock.
type Server struct {
	NS   *server.Server
	lock *os.File
	opts ServerOptions
}

// StartServer starts nats-server with JetStream on opts.DataDir. Each way it
// can fail (dir in use, not writable, port taken) gets one line that says what
// to change.
func StartServer(opts ServerOptions) (*Server, error) {
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
	host, port, err := splitListen(opts.Listen)
	if err != nil {
		lock.Close()
		return nil, err
	}
	if port > 0 {
		// nats-server reports a taken port only in its log; check first so the
		// user gets a clear line instead of a silent readiness timeout.
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			lock.Close()
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
		MaxPayload: ServerMaxPayload,
		NoLog:      true,
		NoSigs:     true,
		SyncAlways: opts.SyncAlways,
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("start nats-server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		lock.Close()
		return nil, fmt.Errorf("nats-server on %s did not become ready within 30s", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return &Server{NS: ns, lock: lock, opts: opts}, nil
}

// URL is the client URL (nats://host:port).
func (s *Server) URL() string { return s.NS.ClientURL() }

// Connect opens a client connection to this server from inside the
// process, with no TCP socket in between: what `serve` gives its own worker
// and gateway (a send costs about a quarter less CPU than over loopback).
// The connection still reports the server's TCP URL as its ConnectedUrl,
// which is the address handed to processes a gateway starts.
func (s *Server) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(s.URL(), append([]nats.Option{nats.Name(name), nats.InProcessServer(s.NS)}, opts...)...)
}

// Shutdown stops the server and releases the data-dir lock.
func (s *Server) Shutdown() {
	s.NS.Shutdown()
	s.NS.WaitForShutdown()
	if s.lock != nil {
		s.lock.Close()
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

// lockDataDir takes an exclusive flock, so a second `serve` on the same data
// dir fails at once instead of corrupting the JetStream store.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "serve.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %v (pass a writable --data DIR)", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		holder := ""
		if len(pid) > 0 {
			holder = " (pid " + string(pid) + ")"
		}
		return nil, fmt.Errorf("data dir %s is in use by another sessionbus serve%s: stop it or pass another --data DIR", dir, holder)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	return f, nil
}
