// Package bustest starts real embedded servers for tests: each on a random
// loopback port in its own temp dir.
package bustest

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	nc, err := nats.Connect(s.URL())
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
