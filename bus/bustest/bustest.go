// Package bustest holds the bus-level helpers of tests: real embedded
// servers (each on a random loopback port in its own temp dir) and
// clusters, connections to them, an operator key, calls, and deadline-bound
// waits. It imports only bus and bus/embedded, so every package's external
// tests can use it.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/embedded"
)

// Server starts an embedded server and stops it when the test ends.
//
// Unlike serve, it syncs lazily (nats-server's default): a test's store is
// a temp dir nothing reads after the test, so flushing every write would
// only slow the suite (a synced write costs ~15x an unsynced one here)
// without testing anything; what a test kills is a process, never the OS,
// and a process kill loses no acknowledged write either way.
func Server(t testing.TB) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", Sync: embedded.LazySync})
	if err != nil {
		t.Fatalf("start embedded server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Connect opens a client connection and JetStream context, closed at test end.
func Connect(t testing.TB, s *embedded.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return ConnectURL(t, s.URL())
}

// ConnectURL is Connect to any server URL (a cluster's, a serve process's),
// with the connection options a test needs (reconnects, a name).
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
