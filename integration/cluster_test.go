package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// TestClusterR3 runs two workers on different nodes of a 3-node cluster
// with R3 streams and buckets, writes through a third node, and keeps
// answering after a node is shut down.
func TestClusterR3(t *testing.T) {
	nodes, creds := bustest.Cluster(t, 3)
	all := bustest.URLs(nodes)
	cfg := config.Default()
	cfg.Bus.Replicas = 3
	op := bustest.Operator(t)
	connect := func(first string) *nats.Conn {
		// the node's own URL first, the others for failover
		nc, err := nats.Connect(first+","+all, append(creds, nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, n := range []int{0, 2} {
		var w *handlers.Worker
		// the first R3 assets can fail while the meta leader settles
		nc := connect(nodes[n].ClientURL())
		retry(t, ctx, func() error {
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			defer acancel()
			var err error
			w, err = handlers.StartWorker(actx, nc, cfg, bus.NewVerifier(op.PublicKey()), nil)
			if err != nil {
				t.Logf("start worker on n%d: %v (retrying)", n+1, err)
			}
			return err
		})
		t.Cleanup(w.Stop)
	}
	writer := connect(nodes[1].ClientURL())
	js, _ := jetstream.New(writer)
	names := bus.NewNames("")
	store, err := sessions.Open(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcripts.Open(ctx, writer, js, names)
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.Stream(ctx, "SB_TRANSCRIPTS")
	if err != nil || info.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("transcripts stream not R3: %v", err)
	}
	if st, _ := store.KV().Status(ctx); st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas != 3 {
		t.Fatal("sessions bucket not R3")
	}
	imp := func(key, text string) {
		retry(t, ctx, func() error {
			// each attempt bounded, as the worker's start above: a write
			// the new R3 bucket's leader never acknowledges (an election
			// under load) would otherwise hold the whole budget in one try
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			defer acancel()
			_, err := importer.Import(actx, store, tr, importer.ImportOptions{SessionKey: key}, strings.NewReader(`{"role":"user","content":"`+text+`"}`), time.Now())
			return err
		})
	}
	imp("agent:main:main", "before the failure")

	client := connect(nodes[2].ClientURL())
	tok, _ := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Hour)
	history := func() string {
		var out string
		retry(t, ctx, func() error {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			b, err := bus.Call(c, client, names, tok, "sessions_history", []byte(`{"sessionKey":"main"}`))
			out = string(b)
			return err
		})
		return out
	}
	if h := history(); !strings.Contains(h, "before the failure") {
		t.Fatalf("history through the cluster: %s", h)
	}
	nodes[0].Shutdown()
	nodes[0].WaitForShutdown()
	imp("agent:main:main", "after the failure")
	if h := history(); !strings.Contains(h, "before the failure") || !strings.Contains(h, "after the failure") {
		t.Fatalf("history after losing a node: %s", h)
	}
}

// retry repeats fn until it succeeds or ctx ends: a cluster answers
// "temporarily unavailable" while leaders move.
func retry(t *testing.T, ctx context.Context, fn func() error) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := fn()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up: %v", err)
		case <-tick.C:
		}
	}
}
