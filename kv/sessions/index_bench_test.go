package sessions

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeKE is a watched bucket entry: a put.
type fakeKE struct {
	key   string
	val   []byte
	rev   uint64
	delta uint64 // values after this one in the watch's initial values
}

func (f fakeKE) Bucket() string                  { return "b" }
func (f fakeKE) Key() string                     { return f.key }
func (f fakeKE) Value() []byte                   { return f.val }
func (f fakeKE) Revision() uint64                { return f.rev }
func (f fakeKE) Created() time.Time              { return time.Time{} }
func (f fakeKE) Delta() uint64                   { return f.delta }
func (f fakeKE) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkIndexBytesPerSession reports the index's heap per session over
// 100k entries shaped like `sessionbus bench`'s, without a server: the
// entries are applied as the watch would apply them.
func BenchmarkIndexBytesPerSession(b *testing.B) {
	n := 100000
	kes := sampleKEs(n)
	for b.Loop() {
	}
	before := heapAfterGC()
	ix := standInIndex()
	for _, ke := range kes {
		ix.apply(ke)
	}
	after := heapAfterGC()
	b.ReportMetric(float64(after-before)/float64(n), "bytes/session")
	runtime.KeepAlive(ix)
	runtime.KeepAlive(kes)
}

// BenchmarkIndexBytesPerSessionLoad is BenchmarkIndexBytesPerSession for
// an index filled by its initial load (a worker's start), which reserves
// its lookups from the first value's count instead of growing them.
func BenchmarkIndexBytesPerSessionLoad(b *testing.B) {
	n := 100000
	kes := sampleKEs(n)
	for b.Loop() {
	}
	before := heapAfterGC()
	ix := standInIndex()
	updates := make(chan jetstream.KeyValueEntry, n+1)
	for _, ke := range kes {
		updates <- ke
	}
	updates <- nil
	if !ix.load(context.Background(), updates) {
		b.Fatal("load ended before the marker")
	}
	after := heapAfterGC()
	b.ReportMetric(float64(after-before)/float64(n), "bytes/session")
	runtime.KeepAlive(ix)
	runtime.KeepAlive(kes)
}

// standInIndex is a bare index with a derive hook standing in for the
// worker's: derived facts per entry, their names shared.
func standInIndex() *Index {
	return bareIndex(slog.Default(), standInDerive())
}

// standInDerive is a derive hook of the worker's shape: one Derived per
// entry, one DerivedNames shared by all.
func standInDerive() Derive {
	names := &DerivedNames{AgentID: "main"}
	return func(e *Entry) *Derived { return &Derived{Names: names, KindAt: 1} }
}
