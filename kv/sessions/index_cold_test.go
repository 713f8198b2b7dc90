package sessions

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkIndexColdApply reports what applying the initial values of a
// bucket costs per entry, without a server: 200k entries shaped like
// `sessionbus bench`'s, filed as the watch's initial values are at start-up.
//
//	go test -run '^$' -bench IndexColdApply -benchtime 1x -cpuprofile cpu.out ./kv/sessions/
func BenchmarkIndexColdApply(b *testing.B) {
	n := 200_000
	kes := sampleKEs(n)
	for b.Loop() {
		ix := bareIndex(slog.Default(), standInDerive())
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
