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
func Server(t testing.TB) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:-1"})
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
