package sessions

import (
	"encoding/json"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// fakeKE is a watched bucket entry: a put.
type fakeKE struct {
	key string
	val []byte
	rev uint64
}

func (f fakeKE) Bucket() string                  { return "b" }
func (f fakeKE) Key() string                     { return f.key }
func (f fakeKE) Value() []byte                   { return f.val }
func (f fakeKE) Revision() uint64                { return f.rev }
func (f fakeKE) Created() time.Time              { return time.Time{} }
func (f fakeKE) Delta() uint64                   { return 0 }
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
	kes := make([]fakeKE, n)
	for i := range n {
		e := Sample(i, 1_790_000_000_000)
		b, _ := json.Marshal(e)
		kes[i] = fakeKE{bus.EncodeKey(e.Key), b, uint64(i + 1)}
	}
	for b.Loop() {
	}
	before := heapAfterGC()
	ix := &Index{store: &Store{b: record.New[Entry](nil, nil, "session")}, log: slog.Default()}
	ix.changed = sync.NewCond(&ix.mu)
	ix.derive = func(e *Entry) any {
		return &struct {
			a, b, c string
			x, y, z bool
		}{a: e.AgentID}
	}
	ix.clear()
	for _, ke := range kes {
		ix.apply(ke)
	}
	after := heapAfterGC()
	b.ReportMetric(float64(after-before)/float64(n), "bytes/session")
	runtime.KeepAlive(ix)
	runtime.KeepAlive(kes)
}
