package sessions

import (
	"encoding/json"
	"fmt"
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
	chs := [...]string{"telegram", "whatsapp", "discord", "slack", "signal"}
	n := 100000
	kes := make([]fakeKE, n)
	for i := range n {
		ch := chs[i%5]
		h := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
		h ^= h >> 31
		e := &Entry{AgentID: "main", SessionID: fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(h), uint16(h>>32), uint16(h>>48)&0xfff, i&0xfff, i),
			UpdatedAt: 1790000000000 - int64(h%(30*24*3600*1000)), Channel: ch, LastChannel: ch, Model: "gpt-5.2", ModelProvider: "openai",
			InputTokens: int64(h % 90000), OutputTokens: int64(h % 9000), ContextTokens: 200000}
		e.CreatedAt = e.UpdatedAt - 5
		switch i % 10 {
		case 7, 8:
			e.Key = fmt.Sprintf("agent:main:%s:group:g%07d", ch, i)
			e.ChatType = "group"
			e.DisplayName = fmt.Sprintf("%s group %d", ch, i)
			e.Origin = &Origin{Provider: ch, ChatType: "group"}
			e.DeliveryContext = &DeliveryContext{Channel: ch, To: fmt.Sprintf("g%07d", i)}
		case 9:
			e.Key = "agent:main:subagent:" + e.SessionID
			e.SpawnedBy = fmt.Sprintf("agent:main:%s:direct:u%07d", chs[(i-9)%5], i-9)
			d := 1
			e.SpawnDepth = &d
			e.Label = fmt.Sprintf("research task %d", i)
			e.Channel, e.LastChannel = "", ""
		default:
			e.Key = fmt.Sprintf("agent:main:%s:direct:u%07d", ch, i)
			e.ChatType = "direct"
			e.DisplayName = fmt.Sprintf("%s user %d", ch, i)
			e.Origin = &Origin{Provider: ch, ChatType: "direct"}
			e.DeliveryContext = &DeliveryContext{Channel: ch, To: fmt.Sprintf("u%07d", i)}
		}
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
