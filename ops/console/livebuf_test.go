package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
)

// The live buffer keeps a running turn from its first message, within its
// bound, and forgets it when the turn ends, goes silent, or a new attempt
// starts at seq 1.
func TestLiveBufferKeepsTheRunningTurn(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newLiveBuffer(func() time.Time { return now })
	msg := func(run string, seq uint64, typ, delta string) []byte {
		m, _ := json.Marshal(bus.LiveEvent{RunID: run, Seq: seq, Type: typ, Delta: delta})
		return m
	}
	b.add("k", msg("r1", 1, bus.LiveText, "a"))
	b.add("k", msg("r1", 2, bus.LiveText, "b"))
	kept, cut, _, cancel := b.subscribe("k")
	cancel()
	if len(kept) != 2 || cut {
		t.Fatalf("kept %d (cut %t), want 2", len(kept), cut)
	}
	// a redelivered attempt starts again
	b.add("k", msg("r1", 1, bus.LiveText, "again"))
	if kept, _, _, cancel = b.subscribe("k"); len(kept) != 1 || !strings.Contains(string(kept[0]), "again") {
		t.Fatalf("after a new attempt: %q", kept)
	}
	cancel()
	b.add("k", msg("r1", 2, bus.LiveDone, ""))
	if kept, _, _, cancel = b.subscribe("k"); len(kept) != 0 || b.total != 0 {
		t.Fatalf("after done: %d kept, %d bytes", len(kept), b.total)
	}
	cancel()
	// past its bound a turn keeps its start and says it was cut
	big := strings.Repeat("x", liveRunMax/4)
	for i := range 6 {
		b.add("big", msg("r2", uint64(i+1), bus.LiveText, big))
	}
	kept, cut, _, cancel = b.subscribe("big")
	cancel()
	if len(kept) != 3 || !cut || b.total > liveRunMax {
		t.Fatalf("a turn past its bound: kept %d, cut %t, %d bytes", len(kept), cut, b.total)
	}
	now = now.Add(liveIdle + time.Second)
	b.sweep()
	if len(b.runs) != 0 || b.total != 0 {
		t.Fatalf("a silent turn was not swept: %d runs, %d bytes", len(b.runs), b.total)
	}
}
