package stores

import (
	"os"
	"slices"
	"testing"

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
