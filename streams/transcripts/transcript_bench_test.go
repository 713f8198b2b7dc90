package transcripts

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/embedded"
)

// One embedded server per benchmark process, loaded lazily: the interleaved
// load (10,000 sessions x 100 entries, round-robin) and the single-session
// load (1,000,000 entries) are each done once, whichever benchmark needs
// them first. TestMain shuts it down.
const (
	benchSessions   = 10_000
	benchPerSession = 100
	benchSingleN    = 1_000_000
	benchSize       = 256
	benchPage       = 50
	benchSingleKey  = "bench.single"
)

var bench struct {
	mu        sync.Mutex
	dir       string
	srv       *embedded.Server
	nc        *nats.Conn
	tr        *Store
	inter     sync.Once
	interErr  error
	single    sync.Once
	singleErr error
	interKey  string
	interSeqs []uint64
}

func benchEnv(b *testing.B) *Store {
	b.Helper()
	bench.mu.Lock()
	defer bench.mu.Unlock()
	if bench.tr != nil {
		return bench.tr
	}
	dir, err := os.MkdirTemp("", "streams-bench-")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:-1", Sync: embedded.LazySync}) // read paths: as before the synced default
	if err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := Open(context.Background(), nc, js, bus.NewNames(""))
	if err != nil {
		b.Fatal(err)
	}
	bench.dir, bench.srv, bench.nc, bench.tr = dir, srv, nc, tr
	return tr
}

func benchShutdown() {
	bench.mu.Lock()
	defer bench.mu.Unlock()
	if bench.tr == nil {
		return
	}
	bench.tr.Close()
	bench.nc.Close()
	bench.srv.Shutdown()
	os.RemoveAll(bench.dir)
	bench.tr = nil
}

// warm runs op untimed a few hundred times after a GC, so a measurement
// that follows a big load does not pay for the load's leftovers (the
// server's block flushing, the loader's garbage).
func warm(b *testing.B, op func() error) {
	b.Helper()
	runtime.GC()
	for i := 0; i < 300; i++ {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
}

func loadInterleaved(b *testing.B) *Store {
	tr := benchEnv(b)
	bench.inter.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		keys, err := LoadInterleaved(ctx, tr, benchSessions, benchPerSession, benchSize)
		if err != nil {
			bench.interErr = err
			return
		}
		fmt.Fprintf(os.Stderr, "load interleaved: %d sessions x %d entries of %d B in %v\n",
			benchSessions, benchPerSession, benchSize, time.Since(start).Round(time.Millisecond))
		bench.interKey = keys[benchSessions/2]
		bench.interSeqs, bench.interErr = tr.Sequences(ctx, bench.interKey, benchPerSession-benchPage, benchPerSession)
	})
	if bench.interErr != nil {
		b.Fatal(bench.interErr)
	}
	return tr
}

func loadSingle(b *testing.B) *Store {
	tr := benchEnv(b)
	bench.single.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		bench.singleErr = LoadSingle(ctx, tr, benchSingleKey, benchSingleN, benchSize)
		fmt.Fprintf(os.Stderr, "load single: 1 session x %d entries of %d B in %v\n",
			benchSingleN, benchSize, time.Since(start).Round(time.Millisecond))
	})
	if bench.singleErr != nil {
		b.Fatal(bench.singleErr)
	}
	return tr
}

// BenchmarkRawDirectGet50 is the raw_direct_get_50 baseline: 50 direct gets
// by known sequence (the 50 newest entries of one interleaved session),
// pipelined on one reply subscription.
func BenchmarkRawDirectGet50(b *testing.B) {
	tr := loadInterleaved(b)
	g, err := NewRawDirectGetter(bench.nc, tr.StreamName())
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	op := func() error {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := g.Get(c, bench.interSeqs)
		return err
	}
	warm(b, op)
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchTail(b *testing.B, tr *Store, key string, offset uint64, wantTotal uint64) {
	ctx := context.Background()
	op := func() error {
		es, total, err := tr.Tail(ctx, key, benchPage, offset)
		if err != nil {
			return err
		}
		if len(es) != benchPage || total != wantTotal || es[benchPage-1].N != total-1-offset {
			return fmt.Errorf("tail: %d entries, total %d", len(es), total)
		}
		return nil
	}
	warm(b, op)
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTranscriptTailInterleaved: newest 50 entries of one session in a
// stream of 1,000,000 entries written round-robin by 10,000 sessions.
func BenchmarkTranscriptTailInterleaved(b *testing.B) {
	tr := loadInterleaved(b)
	benchTail(b, tr, bench.interKey, 0, benchPerSession)
}

// BenchmarkTranscriptTail1M: newest 50 entries of a session of 1,000,000.
func BenchmarkTranscriptTail1M(b *testing.B) {
	tr := loadSingle(b)
	benchTail(b, tr, benchSingleKey, 0, benchSingleN)
}

// BenchmarkTranscriptOffset1M: the 50-entry page at offset 500,000 of it.
func BenchmarkTranscriptOffset1M(b *testing.B) {
	tr := loadSingle(b)
	benchTail(b, tr, benchSingleKey, benchSingleN/2, benchSingleN)
}

// BenchmarkTranscriptCountInterleaved: head get + last-for-subject probe (one wave).
func BenchmarkTranscriptCountInterleaved(b *testing.B) {
	tr := loadInterleaved(b)
	ctx := context.Background()
	op := func() error { _, err := tr.Count(ctx, bench.interKey); return err }
	warm(b, op)
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawDirectGet1: one direct get by sequence (one round trip).
func BenchmarkRawDirectGet1(b *testing.B) {
	tr := loadInterleaved(b)
	g, err := NewRawDirectGetter(bench.nc, tr.StreamName())
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	op := func() error { _, err := g.Get(ctx, bench.interSeqs[:1]); return err }
	warm(b, op)
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
}
