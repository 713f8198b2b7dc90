package stores

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

// A worker creates the streams and buckets every process uses; a gateway
// also the two only gateways write (the a2a bucket, SB_DELIVER), and what
// exists already is opened as it is.
func TestOpenCreatesWhatItsProcessUses(t *testing.T) {
	srv := bustest.Server(t)
	nc, js := bustest.Connect(t, srv)
	cfg := config.Default().Bus
	streams := func() []string {
		var names []string
		for n := range js.StreamNames(bustest.Context(t)).Name() {
			names = append(names, n)
		}
		slices.Sort(names)
		return names
	}
	common := []string{
		"KV_claims", "KV_revocations", "KV_runs", "KV_sessions", "KV_sigheads", "KV_subagents",
		"KV_threadbindings", "KV_trindex", "KV_watchers", "OBJ_archives", "SB_DEADLETTER", "SB_DELIVER", "SB_EVENTS", "SB_RUNS", "SB_SIGNALS", "SB_TRANSCRIPTS",
	}
	w, err := Open(bustest.Context(t), nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := streams(); !slices.Equal(got, common) {
		t.Fatalf("a worker's stores created %v, want %v", got, common)
	}
	// a worker delivers the answers to /goal, and keeps the adapters' dead letters
	if w.A2A != nil || w.Deliveries == nil || w.DeadLetters == nil {
		t.Fatal("a worker's stores opened the gateway's, or no deliveries")
	}
	g, err := Open(bustest.Context(t), nc, cfg, WithGatewayStores())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	want := append(slices.Clone(common), "KV_a2a")
	slices.Sort(want)
	if got := streams(); !slices.Equal(got, want) {
		t.Fatalf("a gateway's stores created %v, want %v", got, want)
	}
	if g.A2A == nil || g.Deliveries == nil || g.Names != w.Names {
		t.Fatalf("gateway stores %+v", g)
	}
}

// lineSignal is a log sink that closes seen at the first line holding want.
type lineSignal struct {
	want string
	once sync.Once
	seen chan struct{}
}

func (l *lineSignal) Write(p []byte) (int, error) {
	if strings.Contains(string(p), l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

// A store that cannot open for a reason a settling cluster gives (here no
// JetStream answering yet: no responders) is tried again, logged, until
// JetStream answers, instead of failing the process that opens it.
func TestOpenWaitsForJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sig := &lineSignal{want: "store not ready yet", seen: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(sig, nil))
	type opened struct {
		s   *Stores
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := Open(bustest.Context(t), nc, config.Default().Bus, WithLogger(log))
		done <- opened{s, err}
	}()
	select {
	case <-sig.seen:
	case o := <-done:
		t.Fatalf("open with no JetStream answering returned at once: %v", o.err)
	}
	if err := srv.EnableJetStream(&server.JetStreamConfig{StoreDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("open once JetStream answers: %v", o.err)
	}
	o.s.Close()
}

// Transient tells what a retry clears from what it cannot.
func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("open bucket sessions: %w", context.DeadlineExceeded), true},
		{jetstream.ErrJetStreamNotEnabled, true},
		{fmt.Errorf("x: %w", nats.ErrNoResponders), true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10052, Description: "replicas > 1 not supported in non-clustered mode"}, false},
		{nats.ErrAuthorization, false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
