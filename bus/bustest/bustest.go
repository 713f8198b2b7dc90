// Package bustest holds the bus-level helpers of tests: real embedded
// servers (each on a random loopback port in its own temp dir) and
// clusters, connections to them, an operator key, calls, and deadline-bound
// waits. It imports only bus, bus/auth and bus/embedded, so every package's
// external tests can use it.
package bustest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/embedded"
)

// Server starts an embedded server and stops it when the test ends. Like
// serve, it runs with NATS auth (a deployment of its own in the test's temp
// dir): Connect carries the credentials, and a test that connects without
// them is refused as any client would be.
//
// Unlike serve, it syncs lazily (nats-server's default): a test's store is
// a temp dir nothing reads after the test, so flushing every write would
// only slow the suite (a synced write costs ~15x an unsynced one here)
// without testing anything; what a test kills is a process, never the OS,
// and a process kill loses no acknowledged write either way.
func Server(t testing.TB) *embedded.Server {
	t.Helper()
	return start(t, Deployment(t))
}

// InsecureServer is Server without NATS auth: every connection is
// anonymous and may do anything (what `serve --insecure` runs), for the
// tests of that mode.
func InsecureServer(t testing.TB) *embedded.Server {
	t.Helper()
	return start(t, nil)
}

func start(t testing.TB, d *auth.Deployment) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Sync: embedded.LazySync, Auth: d})
	if err != nil {
		t.Fatalf("start embedded server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Deployment creates NATS identities (operator, system and default
// account) in a temp dir of the test.
func Deployment(t testing.TB) *auth.Deployment {
	t.Helper()
	d, err := auth.LoadOrCreate(filepath.Join(t.TempDir(), auth.Dir), auth.DefaultAccount)
	if err != nil {
		t.Fatalf("NATS identities: %v", err)
	}
	return d
}

// Options are the connect options of a test's own connections to servers
// trusting d: a user of the default account allowed every subject in it
// (tests use several subject prefixes, the deployment's roles one each).
// Nil d (a server without auth) needs none.
func Options(t testing.TB, d *auth.Deployment) []nats.Option {
	t.Helper()
	if d == nil {
		return nil
	}
	u := testUser(t, d)
	return []nats.Option{nats.UserJWTAndSeed(u.JWT, u.Seed)}
}

// CredsFile writes the credentials of Options' user to a file in a temp
// dir of the test, for a process the test starts; "" for nil d.
func CredsFile(t testing.TB, d *auth.Deployment) string {
	t.Helper()
	if d == nil {
		return ""
	}
	b, err := testUser(t, d).Creds()
	if err != nil {
		t.Fatal(err)
	}
	return writeCreds(t, "test.creds", b)
}

// RoleCreds writes a credentials file for a user of role (the role's
// permissions, for the default subject prefix), as serve writes
// DATA/creds/<role>.creds.
func RoleCreds(t testing.TB, d *auth.Deployment, role auth.Role) string {
	t.Helper()
	u, err := d.Mint(auth.DefaultAccount, role, string(role)+"-test", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.Creds()
	if err != nil {
		t.Fatal(err)
	}
	return writeCreds(t, string(role)+".creds", b)
}

// AdminCreds writes what serve writes to DATA/operator.creds: an admin
// user's credentials followed by op's seed (the caller-token signer), the
// file sessionbus commands read by default.
func AdminCreds(t testing.TB, d *auth.Deployment, op *bus.Operator) string {
	t.Helper()
	u, err := d.Mint(auth.DefaultAccount, auth.RoleAdmin, "admin-test", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.Creds()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := op.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return writeCreds(t, bus.CredsFile, append(append(b, '\n'), seed...))
}

func writeCreds(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func testUser(t testing.TB, d *auth.Deployment) *auth.User {
	t.Helper()
	u, err := d.MintWith(auth.DefaultAccount, auth.RoleAdmin, "test", "", 0, func(p *jwt.Permissions) { *p = jwt.Permissions{} })
	if err != nil {
		t.Fatalf("mint a test user: %v", err)
	}
	return u
}

// Connect opens a client connection and JetStream context, closed at test
// end, with the credentials s needs.
func Connect(t testing.TB, s *embedded.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return ConnectURL(t, s.URL(), append(Options(t, s.Deployment()), opts...)...)
}

// ConnectURL is Connect to any server URL (a cluster's, a serve process's),
// with the connection options a test needs (credentials, reconnects, a
// name).
func ConnectURL(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// Operator makes a new operator key (the signer of caller tokens), failing
// the test when it cannot.
func Operator(t testing.TB) *bus.Operator {
	t.Helper()
	op, err := bus.NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// Caller returns a function that calls tool with body on nc as tok's
// caller, each call given 10 seconds, and returns only the error (nil or a
// thrown *bus.Error): for tests that count requests and errors, not replies.
func Caller(nc *nats.Conn, names bus.Names, tok string) func(tool, body string) error {
	return func(tool, body string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := bus.Call(ctx, nc, names, tok, tool, []byte(body))
		return err
	}
}
