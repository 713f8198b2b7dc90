package sessions

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// BenchmarkIndexColdApply reports what applying the initial values of a
// bucket costs per entry, without a server: 200k entries shaped like
// `sessionbus bench`'s, filed as the watch's initial values are at start-up.
//
//	go test -run '^$' -bench IndexColdApply -benchtime 1x -cpuprofile cpu.out ./kv/sessions/
func BenchmarkIndexColdApply(b *testing.B) {
	n := 200_000
	kes := make([]fakeKE, n)
	for i := range n {
		e := Sample(i, 1_790_000_000_000)
		v, _ := json.Marshal(e)
		kes[i] = fakeKE{bus.EncodeKey(e.Key), v, uint64(i + 1)}
	}
	for b.Loop() {
		ix := &Index{store: &Store{b: record.New[Entry](nil, nil, "session")}, log: slog.Default()}
		ix.changed = sync.NewCond(&ix.mu)
		ix.derive = func(e *Entry) any { return &struct{ a string }{a: e.AgentID} }
		ix.clear()
		updates := make(chan jetstream.KeyValueEntry, 256) // as nats.go's watcher
		go func() {
			for _, ke := range kes {
				updates <- ke
			}
			updates <- nil
		}()
		start := time.Now()
		if !ix.load(context.Background(), updates) {
			b.Fatal("load ended before the marker")
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/float64(n), "µs/entry")
	}
}
