package runqueue

import (
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

// ctx is the context of one test's server calls.
var ctx = bustest.Context

func openRuns(t *testing.T) *Queue {
	t.Helper()
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	q, err := Open(ctx(t), js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func queued(t *testing.T, r *Queue) uint64 {
	t.Helper()
	info, err := r.Stream().Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// Acked runs are purged below the shared consumer's ack floor; a run acked
// out of order above an unacked one stays until the floor passes it, and
// unacked runs are never purged.
func TestTrimBelowAckFloor(t *testing.T) {
	r := openRuns(t)
	for i := range 4 {
		id := "t" + string(rune('0'+i))
		if err := r.Publish(ctx(t), &Request{RunID: id, SessionKey: "agent:main:main", AgentID: "main", ChainID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.Unfinished(ctx(t)); err != nil || n != 4 {
		t.Fatalf("unfinished before any consumer: %d %v", n, err)
	}
	cons, err := r.Stream().CreateOrUpdateConsumer(ctx(t), jetstream.ConsumerConfig{Durable: bus.NewNames("").GatewaysConsumer(), AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(4, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 4 {
		t.Fatalf("fetched %d", len(msgs))
	}
	for _, i := range []int{0, 1, 3} { // run 2 is still running
		if err := msgs[i].DoubleAck(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.Unfinished(ctx(t)); err != nil || n != 1 {
		t.Fatalf("unfinished: %d %v", n, err)
	}
	if n, err := r.Trim(ctx(t)); err != nil || n != 2 {
		t.Fatalf("trim purged %d %v, want 2", n, err)
	}
	if n := queued(t, r); n != 2 {
		t.Fatalf("%d left, want 2 (the running one and the one acked after it)", n)
	}
	if err := msgs[2].DoubleAck(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Trim(ctx(t)); err != nil || n != 2 {
		t.Fatalf("second trim purged %d %v, want 2", n, err)
	}
	if n, err := r.Trim(ctx(t)); err != nil || n != 0 {
		t.Fatalf("idle trim purged %d %v", n, err)
	}
}
