package embedded_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/bus/embedded"
)

func TestServerStartErrors(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") {
		t.Fatalf("url %s", s.URL())
	}
	if _, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "in use by another sessionbus serve") {
		t.Fatalf("second serve on the same data dir: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: l.Addr().String()}); err == nil || !strings.Contains(err.Error(), "cannot listen on") {
		t.Fatalf("taken port: %v", err)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.Start(embedded.Options{DataDir: filepath.Join(file, "data"), Listen: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "not usable") {
		t.Fatalf("unusable data dir: %v", err)
	}
	if _, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "nonsense"}); err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("bad listen: %v", err)
	}
	// the lock is released on shutdown, so a restart on the same dir works
	s.Shutdown()
	s2, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("restart on the same dir: %v", err)
	}
	s2.Shutdown()
}

// An in-process connection works like a TCP one and reports the server's
// TCP URL (what a gateway hands to the exec agents it starts).
func TestServerConnectInProcess(t *testing.T) {
	s := bustest.Server(t)
	nc, err := s.Connect("in-process test", bustest.Options(t, s.Deployment())...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.ConnectedUrl() != s.URL() {
		t.Fatalf("connected url %q, want %q", nc.ConnectedUrl(), s.URL())
	}
	sub, err := nc.Subscribe("in.process", func(m *nats.Msg) { _ = m.Respond(append([]byte("re: "), m.Data...)) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	tcp, err := nats.Connect(s.URL(), bustest.Options(t, s.Deployment())...)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	res, err := tcp.Request("in.process", []byte("hi"), 10*time.Second)
	if err != nil || string(res.Data) != "re: hi" {
		t.Fatalf("request over tcp to an in-process responder: %v %v", res, err)
	}
	if n := s.NS.NumClients(); n != 2 {
		t.Fatalf("%d clients, want 2", n)
	}
}
