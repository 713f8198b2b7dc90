package sessions

import (
	"log/slog"
	"runtime"
	"testing"
	"time"
)

// BenchmarkIndexBytesPerSession1M is BenchmarkIndexBytesPerSession at a
// million sessions, with how long one full garbage collection takes while the
// index (and the million encoded entries it was built from) is live.
// Run it alone: it holds ~2 GB.
//
//	go test -run '^$' -bench IndexBytesPerSession1M -benchtime 1x ./kv/sessions/
func BenchmarkIndexBytesPerSession1M(b *testing.B) {
	n := 1_000_000
	kes := sampleKEs(n)
	for b.Loop() {
	}
	before := heapAfterGC()
	ix := bareIndex(slog.Default(), standInDerive())
	start := time.Now()
	for _, ke := range kes {
		ix.apply(ke)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "apply-ms")
	after := heapAfterGC()
	t0 := time.Now()
	runtime.GC()
	b.ReportMetric(float64(time.Since(t0).Milliseconds()), "full-gc-ms")
	b.ReportMetric(float64(after-before)/float64(n), "bytes/session")
	runtime.KeepAlive(ix)
	runtime.KeepAlive(kes)
}
