package transcripts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

type fixture struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
	tr *Store
	kv jetstream.KeyValue
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := bustest.Server(t)
	nc, js := bustest.Connect(t, s)
	tr, err := Open(ctx(t), nc, js, bus.NewNames(""))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(tr.Close)
	kv, err := js.KeyValue(ctx(t), "trindex")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, nc: nc, js: js, tr: tr, kv: kv}
}

// ctx is the context of one test's server calls.
var ctx = bustest.Context

func body(key string, n int) []byte { return fmt.Appendf(nil, `{"k":%q,"i":%d}`, key, n) }

func (f *fixture) appendN(key string, from, n int) {
	f.t.Helper()
	for i := from; i < from+n; i++ {
		got, err := f.tr.Append(ctx(f.t), key, body(key, i))
		if err != nil {
			f.t.Fatalf("append %d: %v", i, err)
		}
		if got != uint64(i) {
			f.t.Fatalf("append returned entry %d, want %d", got, i)
		}
	}
}

func (f *fixture) appendBatch(key string, from, n int) {
	f.t.Helper()
	es := make([][]byte, n)
	for i := range es {
		es[i] = body(key, from+i)
	}
	got, err := f.tr.Append(ctx(f.t), key, es...)
	if err != nil {
		f.t.Fatalf("append batch [%d,%d): %v", from, from+n, err)
	}
	if got != uint64(from) {
		f.t.Fatalf("append batch returned %d, want %d", got, from)
	}
}

// checkRange asserts es are entries [from, from+len) of key as body() made them.
func checkRange(t *testing.T, key string, es []Entry, from, to uint64) {
	t.Helper()
	if uint64(len(es)) != to-from {
		t.Fatalf("%s: got %d entries, want [%d,%d) = %d", key, len(es), from, to, to-from)
	}
	for i, e := range es {
		n := from + uint64(i)
		if e.N != n || string(e.Data) != string(body(key, int(n))) {
			t.Fatalf("%s: entry %d = N %d data %s, want N %d data %s", key, i, e.N, e.Data, n, body(key, int(n)))
		}
		if e.Seq == 0 || e.Time.IsZero() {
			t.Fatalf("%s: entry %d has seq %d time %v", key, n, e.Seq, e.Time)
		}
		if i > 0 && e.Seq <= es[i-1].Seq {
			t.Fatalf("%s: sequences not ascending at %d", key, n)
		}
	}
}

func (f *fixture) checkAll(key string, total uint64) {
	f.t.Helper()
	c, err := f.tr.Count(ctx(f.t), key)
	if err != nil || c != total {
		f.t.Fatalf("count %s = %d, %v; want %d", key, c, err, total)
	}
	es, err := f.tr.Read(ctx(f.t), key, 0, total+10)
	if err != nil {
		f.t.Fatalf("read all: %v", err)
	}
	checkRange(f.t, key, es, 0, total)
	f.checkIndex(key, total)
}

// checkIndex asserts the stored head and chunks describe total entries.
func (f *fixture) checkIndex(key string, total uint64) {
	f.t.Helper()
	e, err := f.kv.Get(ctx(f.t), "h."+key)
	if err != nil {
		if total == 0 && errors.Is(err, jetstream.ErrKeyNotFound) {
			return
		}
		f.t.Fatalf("head: %v", err)
	}
	h, err := decodeHeadMsg(&nats.Msg{Header: nats.Header{"Nats-Sequence": {"1"}}, Data: e.Value()})
	if err != nil || h.bad {
		f.t.Fatalf("head %s undecodable: %s", key, e.Value())
	}
	if h.Count != total || uint64(len(h.Tail)) != total-tailStart(total) {
		f.t.Fatalf("head %s = %s, want %d entries", key, e.Value(), total)
	}
	for k := uint64(0); k < total/ChunkSize; k++ {
		ce, err := f.kv.Get(ctx(f.t), chunkKey(key, k))
		if err != nil {
			f.t.Fatalf("chunk %d: %v", k, err)
		}
		if _, err := decodeChunk(ce.Value()); err != nil {
			f.t.Fatalf("chunk %d: %v", k, err)
		}
	}
}

func TestOpenIdempotentAndConfig(t *testing.T) {
	f := newFixture(t)
	tr2, err := Open(ctx(t), f.nc, f.js, bus.NewNames(""))
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	tr2.Close()
	s, err := f.js.Stream(ctx(t), "SB_TRANSCRIPTS")
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	if !c.AllowDirect || !c.AllowAtomicPublish || c.Storage != jetstream.FileStorage || c.Discard != jetstream.DiscardOld ||
		len(c.Subjects) != 1 || c.Subjects[0] != "sb.tr.>" || c.MaxMsgsPerSubject != -1 {
		t.Fatalf("stream config: %+v", c)
	}
	st, err := f.kv.Status(ctx(t))
	if err != nil || st.History() != 1 || st.Bucket() != "trindex" {
		t.Fatalf("bucket status %v %v", st, err)
	}
	// An existing stream without the flags gets them back.
	c.AllowAtomicPublish = false
	if _, err := f.js.UpdateStream(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	tr3, err := Open(ctx(t), f.nc, f.js, bus.NewNames(""))
	if err != nil {
		t.Fatal(err)
	}
	tr3.Close()
	s, _ = f.js.Stream(ctx(t), "SB_TRANSCRIPTS")
	if !s.CachedInfo().Config.AllowAtomicPublish {
		t.Fatal("allow_atomic not restored")
	}
}

func TestEmptyTranscript(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.main"
	if c, err := f.tr.Count(ctx(t), key); err != nil || c != 0 {
		t.Fatalf("count = %d, %v", c, err)
	}
	if es, err := f.tr.Read(ctx(t), key, 0, 10); err != nil || len(es) != 0 {
		t.Fatalf("read = %v, %v", es, err)
	}
	es, total, err := f.tr.Tail(ctx(t), key, 50, 0)
	if err != nil || len(es) != 0 || total != 0 {
		t.Fatalf("tail = %v %d %v", es, total, err)
	}
	if _, total, err := f.tr.Tail(ctx(t), key, 50, 7); err != nil || total != 0 {
		t.Fatalf("tail offset = %d %v", total, err)
	}
}

func TestAppendReadTailChunkBoundaries(t *testing.T) {
	f := newFixture(t)
	for _, size := range []int{1, 63, 64, 65, 128, 129} {
		for _, mode := range []string{"single", "batch"} {
			key := fmt.Sprintf("agent.main.%s%d", mode, size)
			if mode == "single" {
				f.appendN(key, 0, size)
			} else {
				f.appendBatch(key, 0, size)
			}
			total := uint64(size)
			f.checkAll(key, total)
			for _, r := range [][2]uint64{{0, 1}, {62, 66}, {63, 64}, {64, 65}, {60, 129}, {127, 129}, {1, 200}, {5, 5}, {9, 3}, {500, 600}} {
				es, err := f.tr.Read(ctx(t), key, r[0], r[1])
				if err != nil {
					t.Fatalf("%s read %v: %v", key, r, err)
				}
				from, to := r[0], min(r[1], total)
				if from >= to {
					from, to = 0, 0
				}
				checkRange(t, key, es, from, to)
			}
			for _, limit := range []int{1, 50, 63, 64, 65, 200} {
				for _, offset := range []uint64{0, 1, 63, 64, 65, total - 1, total, total + 5} {
					es, got, err := f.tr.Tail(ctx(t), key, limit, offset)
					if err != nil {
						t.Fatalf("%s tail %d/%d: %v", key, limit, offset, err)
					}
					if got != total {
						t.Fatalf("tail total %d want %d", got, total)
					}
					var from, to uint64
					if offset < total {
						to = total - offset
						from = to - min(uint64(limit), to)
					}
					checkRange(t, key, es, from, to)
				}
			}
			if es, _, err := f.tr.Tail(ctx(t), key, 0, 0); err != nil || len(es) != 0 {
				t.Fatalf("tail limit 0 = %d entries, %v", len(es), err)
			}
		}
	}
	// Mixed: batches that straddle chunk boundaries after single appends.
	key := "agent.main.mixed"
	f.appendN(key, 0, 60)
	f.appendBatch(key, 60, 10)    // crosses 64
	f.appendBatch(key, 70, 200)   // seals 3 chunks
	f.appendN(key, 270, 3)        // 273
	f.appendBatch(key, 273, 1100) // two batches (1000 + 100)
	f.checkAll(key, 1373)
}

func TestHeadersAndBatchContiguity(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.main"
	// Other sessions write concurrently, so contiguity is not an accident.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		js, _ := jetstream.New(f.nc)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := js.Publish(context.Background(), "sb.tr.noise.n"+strconv.Itoa(i%7), []byte(`{"noise":1}`)); err != nil {
				t.Errorf("noise publish: %v", err)
				return
			}
		}
	}()
	f.appendN(key, 0, 3)
	for b := 0; b < 20; b++ {
		f.appendBatch(key, 3+b*50, 50)
	}
	close(stop)
	wg.Wait()
	total := uint64(3 + 20*50)
	f.checkAll(key, total)
	es, err := f.tr.Read(ctx(t), key, 0, total)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.js.Stream(ctx(t), "SB_TRANSCRIPTS")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		m, err := st.GetMsg(ctx(t), e.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Sb-Entry") != strconv.Itoa(i) {
			t.Fatalf("entry %d: Sb-Entry %q", i, m.Header.Get("Sb-Entry"))
		}
		first := i < 3 || (i-3)%50 == 0
		prev := m.Header.Get("Sb-Prev")
		switch {
		case first && i == 0 && prev != "0":
			t.Fatalf("entry 0: Sb-Prev %q, want 0", prev)
		case first && i > 0 && prev != strconv.FormatUint(es[i-1].Seq, 10):
			t.Fatalf("entry %d: Sb-Prev %q, want %d", i, prev, es[i-1].Seq)
		case !first && prev != "":
			t.Fatalf("entry %d inside a batch has Sb-Prev %q", i, prev)
		case !first && e.Seq != es[i-1].Seq+1:
			t.Fatalf("batch not contiguous: entry %d seq %d after %d", i, e.Seq, es[i-1].Seq)
		}
		if i == 4 {
			t.Logf("stored headers of a batch message: %v", m.Header)
		}
	}
}

// AppendEachIfLen on one server stores its entries one publish each, every
// one a compare-and-set on the entry before it (no atomic batch, which the
// server stages in a file store of its own), reads back like any append,
// and refuses a wrong length without writing.
func TestAppendEachIfLenPublishesOneAtATime(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.imported"
	f.appendN(key, 0, 2)
	es := make([][]byte, 5)
	for i := range es {
		es[i] = body(key, 2+i)
	}
	if _, err := f.tr.AppendEachIfLen(ctx(t), key, 1, es...); !errors.Is(err, ErrConflict) {
		t.Fatalf("a wrong length: %v, want ErrConflict", err)
	}
	got, err := f.tr.AppendEachIfLen(ctx(t), key, 2, es...)
	if err != nil || got != 2 {
		t.Fatalf("append each: entry %d, %v; want 2", got, err)
	}
	f.checkAll(key, 7)
	all, err := f.tr.Read(ctx(t), key, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.js.Stream(ctx(t), "SB_TRANSCRIPTS")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range all[2:] {
		m, err := st.GetMsg(ctx(t), e.Seq)
		if err != nil {
			t.Fatal(err)
		}
		prev := strconv.FormatUint(all[i+1].Seq, 10)
		if m.Header.Get("Sb-Prev") != prev || m.Header.Get("Nats-Batch-Id") != "" {
			t.Fatalf("entry %d: Sb-Prev %q (want %s), batch id %q: not a publish of its own chained to the one before",
				i+2, m.Header.Get("Sb-Prev"), prev, m.Header.Get("Nats-Batch-Id"))
		}
	}
	f.appendN(key, 7, 1) // and the index carries on from it
	f.checkAll(key, 8)
}

// A batch whose CAS header is wrong, or which is incomplete, stores nothing.
func TestAtomicBatchFailureWritesNothing(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.main"
	f.appendN(key, 0, 2)
	st, err := f.js.Stream(ctx(t), "SB_TRANSCRIPTS")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(ctx(t))
	before := info.State.Msgs

	es := make([][]byte, 20)
	for i := range es {
		es[i] = body(key, 2+i)
	}
	msgs := buildEntryMsgs(f.tr.Subject(key), 2, 999999, es, newBatchID) // wrong expected seq
	for _, m := range msgs[:len(msgs)-1] {
		if err := f.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	reply, err := f.nc.RequestMsg(msgs[len(msgs)-1], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseAck(reply); !bus.IsWrongLastSeq(err) {
		t.Fatalf("commit with wrong expected seq: %v, want wrong last sequence", err)
	}

	// Incomplete: message 5 of the batch never arrives.
	msgs = buildEntryMsgs(f.tr.Subject(key), 2, 0, es, newBatchID)
	for i, m := range msgs[:len(msgs)-1] {
		if i != 5 {
			if err := f.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	reply, err = f.nc.RequestMsg(msgs[len(msgs)-1], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseAck(reply); err == nil {
		t.Fatal("incomplete batch committed")
	} else {
		t.Logf("incomplete batch: %v", err)
	}

	info, _ = st.Info(ctx(t))
	if info.State.Msgs != before {
		t.Fatalf("failed batches stored %d messages", info.State.Msgs-before)
	}
	f.checkAll(key, 2)
	f.appendBatch(key, 2, 20)
	f.checkAll(key, 22)
}

func TestConcurrentWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	f := newFixture(t)
	key := "agent.main.shared"
	const writers, appends = 4, 60
	type tag struct{ w, a, i, n int }
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for a := 0; a < appends; a++ {
				n := 1 + (a*7+w)%5 // 1..5 entries per append
				es := make([][]byte, n)
				for i := range es {
					es[i] = fmt.Appendf(nil, `{"w":%d,"a":%d,"i":%d,"n":%d}`, w, a, i, n)
				}
				if _, err := f.tr.Append(context.Background(), key, es...); err != nil {
					errs <- fmt.Errorf("writer %d append %d: %w", w, a, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total, err := f.tr.Count(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	es, err := f.tr.Read(ctx(t), key, 0, total)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int]bool{}
	var want uint64
	for i := 0; i < len(es); {
		var tg tag
		if _, err := fmt.Sscanf(string(es[i].Data), `{"w":%d,"a":%d,"i":%d,"n":%d}`, &tg.w, &tg.a, &tg.i, &tg.n); err != nil {
			t.Fatalf("entry %d: %s", i, es[i].Data)
		}
		if tg.i != 0 {
			t.Fatalf("entry %d starts in the middle of an append: %s", i, es[i].Data)
		}
		for j := 0; j < tg.n; j++ {
			e := es[i+j]
			if e.N != uint64(i+j) {
				t.Fatalf("entry numbering gap at %d", i+j)
			}
			if string(e.Data) != fmt.Sprintf(`{"w":%d,"a":%d,"i":%d,"n":%d}`, tg.w, tg.a, j, tg.n) {
				t.Fatalf("append w%d a%d interleaved at entry %d: %s", tg.w, tg.a, i+j, e.Data)
			}
		}
		if seen[[2]int{tg.w, tg.a}] {
			t.Fatalf("append w%d a%d stored twice", tg.w, tg.a)
		}
		seen[[2]int{tg.w, tg.a}] = true
		i += tg.n
		want += uint64(tg.n)
	}
	if len(seen) != writers*appends || want != total {
		t.Fatalf("%d appends stored (%d entries), want %d", len(seen), total, writers*appends)
	}
	f.checkIndex(key, total)
}

// rawPublish stores entries the way Append does but never touches the index:
// a writer that died between its publish and its head update.
func (f *fixture) rawPublish(key string, n, prev uint64, count int, batch bool) uint64 {
	f.t.Helper()
	es := make([][]byte, count)
	for i := range es {
		es[i] = body(key, int(n)+i)
	}
	if !batch {
		for i := range es {
			m := buildEntryMsgs(f.tr.Subject(key), n+uint64(i), prev, es[i:i+1], newBatchID)[0]
			a, err := f.js.PublishMsg(ctx(f.t), m)
			if err != nil {
				f.t.Fatalf("raw publish: %v", err)
			}
			prev = a.Sequence
		}
		return prev
	}
	msgs := buildEntryMsgs(f.tr.Subject(key), n, prev, es, newBatchID)
	for _, m := range msgs[:len(msgs)-1] {
		if err := f.nc.PublishMsg(m); err != nil {
			f.t.Fatal(err)
		}
	}
	r, err := f.nc.RequestMsg(msgs[len(msgs)-1], 5*time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	a, err := parseAck(r)
	if err != nil {
		f.t.Fatalf("raw batch: %v", err)
	}
	return a.Seq
}

func (f *fixture) lastSeq(key string) uint64 {
	f.t.Helper()
	es, _, err := f.tr.Tail(ctx(f.t), key, 1, 0)
	if err != nil || len(es) != 1 {
		f.t.Fatalf("tail 1: %v", err)
	}
	return es[0].Seq
}

func TestCrashRepair(t *testing.T) {
	f := newFixture(t)
	noise := func() { // other sessions between the orphans, so seq-1 is not ours
		if _, err := f.tr.Append(ctx(t), "agent.other.x", []byte(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("one orphan, repaired by Count", func(t *testing.T) {
		key := "agent.main.one"
		f.appendN(key, 0, 5)
		noise()
		f.rawPublish(key, 5, f.lastSeq(key), 1, false)
		f.checkIndex(key, 5) // index lags
		f.checkAll(key, 6)   // Count repairs
	})
	t.Run("several orphans, repaired by Tail", func(t *testing.T) {
		key := "agent.main.several"
		f.appendN(key, 0, 60)
		prev := f.lastSeq(key)
		for i := 0; i < 9; i++ { // crosses the 64 boundary: repair seals a chunk
			noise()
			prev = f.rawPublish(key, uint64(60+i), prev, 1, false)
		}
		f.checkIndex(key, 60)
		es, total, err := f.tr.Tail(ctx(t), key, 50, 0)
		if err != nil || total != 69 {
			t.Fatalf("tail: %d %v", total, err)
		}
		checkRange(t, key, es, 19, 69)
		f.checkIndex(key, 69)
	})
	t.Run("orphan batches, repaired by Append", func(t *testing.T) {
		key := "agent.main.batches"
		f.appendN(key, 0, 3)
		prev := f.lastSeq(key)
		noise()
		prev = f.rawPublish(key, 3, prev, 300, true) // contiguous, one Sb-Prev
		noise()
		prev = f.rawPublish(key, 303, prev, 2, false)
		noise()
		f.rawPublish(key, 305, prev, 70, true)
		f.checkIndex(key, 3)
		f.appendN(key, 375, 1) // CAS fails, repairs, retries
		f.checkAll(key, 376)
		f.appendBatch(key, 376, 10)
		f.checkAll(key, 386)
	})
	t.Run("orphans from an empty index", func(t *testing.T) {
		key := "agent.main.fresh"
		prev := f.rawPublish(key, 0, 0, 2, false)
		f.rawPublish(key, 2, prev, 100, true)
		f.checkAll(key, 102)
	})
}

func TestCorruptOrStaleHead(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.main"
	f.appendN(key, 0, 70)
	if _, err := f.kv.Put(ctx(t), "h."+key, []byte(`{"garbage`)); err != nil {
		t.Fatal(err)
	}
	f.checkAll(key, 70) // rebuilt from the stream
	// A deleted head (KV delete marker) is rebuilt too.
	if err := f.kv.Delete(ctx(t), "h."+key); err != nil {
		t.Fatal(err)
	}
	f.appendN(key, 70, 1)
	f.checkAll(key, 71)
}

func TestDelete(t *testing.T) {
	f := newFixture(t)
	key, child := "agent.main.main", "agent.main.main.sub" // child's key extends key
	f.appendBatch(key, 0, 130)
	f.appendBatch(child, 0, 70)
	if err := f.tr.Delete(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	f.checkAll(key, 0)
	f.checkAll(child, 70)
	for k := uint64(0); k < 2; k++ {
		if _, err := f.kv.Get(ctx(t), chunkKey(key, k)); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("chunk %d after delete: %v", k, err)
		}
	}
	f.appendN(key, 0, 3)
	f.checkAll(key, 3)
}

func TestInterruptedDelete(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.main"
	f.appendBatch(key, 0, 100)
	st, _ := f.js.Stream(ctx(t), "SB_TRANSCRIPTS")
	// Delete got as far as purging the subject; the index survived.
	if err := st.Purge(ctx(t), jetstream.WithPurgeSubject(f.tr.Subject(key))); err != nil {
		t.Fatal(err)
	}
	if c, err := f.tr.Count(ctx(t), key); err != nil || c != 0 {
		t.Fatalf("count after torn delete = %d, %v", c, err)
	}
	f.appendN(key, 0, 2)
	f.checkAll(key, 2)

	// Torn delete again, and this time the next call is an Append.
	if err := st.Purge(ctx(t), jetstream.WithPurgeSubject(f.tr.Subject(key))); err != nil {
		t.Fatal(err)
	}
	f.appendN(key, 0, 1)
	f.checkAll(key, 1)
}

func TestMissingEntry(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.main"
	f.appendN(key, 0, 10)
	es, err := f.tr.Read(ctx(t), key, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.js.Stream(ctx(t), "SB_TRANSCRIPTS")
	if err := st.DeleteMsg(ctx(t), es[0].Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tr.Read(ctx(t), key, 0, 10); !errors.Is(err, ErrEntryMissing) {
		t.Fatalf("read over a deleted message: %v, want ErrEntryMissing", err)
	}
	if es, _, err := f.tr.Tail(ctx(t), key, 5, 0); err != nil || len(es) != 5 {
		t.Fatalf("tail past the hole: %d %v", len(es), err)
	}
}

func TestInvalidInput(t *testing.T) {
	f := newFixture(t)
	for _, k := range []string{"", ".a", "a.", "a..b", "a.*", "a.>", "a b", "a:b", "ü", string(make([]byte, 1000))} {
		if _, err := f.tr.Append(ctx(t), k, []byte("{}")); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("append key %q: %v", k, err)
		}
		if _, err := f.tr.Count(ctx(t), k); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("count key %q: %v", k, err)
		}
	}
	if _, err := f.tr.Append(ctx(t), "a.b"); !errors.Is(err, ErrEmptyEntry) {
		t.Fatalf("no entries: %v", err)
	}
	if _, err := f.tr.Append(ctx(t), "a.b", []byte("{}"), nil); !errors.Is(err, ErrEmptyEntry) {
		t.Fatalf("empty entry: %v", err)
	}
	if _, err := f.tr.Append(ctx(t), "a.b", make([]byte, DefaultMaxEntryBytes+1)); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("big entry: %v", err)
	}
	if c, _ := f.tr.Count(ctx(t), "a.b"); c != 0 {
		t.Fatalf("rejected appends wrote %d entries", c)
	}
}

func TestInterleavedSessionsLoader(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	f := newFixture(t)
	// Two sessions exist already: the loader must notice and continue them.
	f.appendN(BenchKey(3), 0, 5)
	f.appendBatch(BenchKey(7), 0, 70)
	f.rawPublish(BenchKey(5), 0, 0, 2, true) // orphans: stored, never indexed
	const sessions, per = 300, 150
	start := map[string]int{BenchKey(3): 5, BenchKey(7): 70, BenchKey(5): 2}
	n, err := f.tr.BulkLoad(ctx(t), func(yield func(string, []byte) bool) {
		for r := 0; r < per; r++ {
			for s := 0; s < sessions; s++ {
				k := BenchKey(s)
				if !yield(k, body(k, start[k]+r)) {
					return
				}
			}
		}
	})
	if err != nil || n != sessions*per {
		t.Fatalf("bulk load: %d, %v", n, err)
	}
	for s := 0; s < sessions; s++ {
		k := BenchKey(s)
		total := uint64(start[k] + per)
		if s%37 == 0 || start[k] > 0 {
			f.checkAll(k, total)
		}
		es, got, err := f.tr.Tail(ctx(t), k, 50, 10)
		if err != nil || got != total {
			t.Fatalf("%s tail: %d %v", k, got, err)
		}
		checkRange(t, k, es, total-60, total-10)
	}
	// Appending after a load continues the chain.
	f.appendN(BenchKey(1), per, 1)
	f.checkAll(BenchKey(1), per+1)
}

func TestLoaderSingleSessionBatches(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.big"
	n, err := f.tr.BulkLoad(ctx(t), func(yield func(string, []byte) bool) {
		for i := 0; i < 2500; i++ {
			if !yield(key, body(key, i)) {
				return
			}
		}
	})
	if err != nil || n != 2500 {
		t.Fatalf("load: %d %v", n, err)
	}
	f.checkAll(key, 2500)
	es, total, err := f.tr.Tail(ctx(t), key, 50, 1250)
	if err != nil || total != 2500 {
		t.Fatal(err)
	}
	checkRange(t, key, es, 1200, 1250)
}

func TestLoadHelpers(t *testing.T) {
	f := newFixture(t)
	keys, err := LoadInterleaved(ctx(t), f.tr, 50, 70, 256)
	if err != nil || len(keys) != 50 {
		t.Fatalf("load interleaved: %v", err)
	}
	if err := LoadSingle(ctx(t), f.tr, "bench.single", 1500, 256); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{keys[0], keys[49], "bench.single"} {
		es, total, err := f.tr.Tail(ctx(t), k, 50, 0)
		if err != nil || len(es) != 50 || es[49].N != total-1 || len(es[0].Data) != 256 {
			t.Fatalf("%s: %d entries, total %d, %v", k, len(es), total, err)
		}
	}
	g, err := NewRawDirectGetter(f.nc, f.tr.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	seqs, err := f.tr.Sequences(ctx(t), keys[0], 20, 70)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := g.Get(ctx(t), seqs); err != nil || n != 50*256 {
		t.Fatalf("raw get: %d %v", n, err)
	}
}

func TestParseSeqs(t *testing.T) {
	for in, want := range map[string]string{"[]": "[]", "[1]": "[1]", " [ 1 , 22,333 ] ": "[1,22,333]"} {
		got, err := parseSeqs([]byte(in), nil)
		if err != nil || string(appendSeqs(nil, got)) != want {
			t.Fatalf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "[", "[1,", "[1 2]", "[a]", "[1]x", "[-1]", "[99999999999999999999999]"} {
		if _, err := parseSeqs([]byte(in), nil); err == nil {
			t.Fatalf("%q parsed", in)
		}
	}
	if s, ok := fastAckSeq([]byte(`{"stream":"SB_TRANSCRIPTS","seq":42}`)); !ok || s != 42 {
		t.Fatal("fast ack")
	}
	if _, ok := fastAckSeq([]byte(`{"stream":"S","seq":42,"duplicate":true}`)); ok {
		t.Fatal("fast ack took a duplicate")
	}
}

// On a replicated stream a follower may answer direct gets late; the rare
// paths confirm with the leader (STREAM.MSG.GET). Exercise them on R1 by
// pretending the stream is replicated.
func TestLeaderConfirmation(t *testing.T) {
	f := newFixture(t)
	f.tr.replicated = true
	key := "agent.main.main"
	f.appendN(key, 0, 3)
	es, err := f.tr.Read(ctx(t), key, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	e, found, err := f.tr.leaderGet(ctx(t), es[1].Seq, "")
	if err != nil || !found || e.n != 1 || e.seq != es[1].Seq || string(e.data) != string(es[1].Data) || !e.hasPrev || e.prev != es[0].Seq || e.subject != f.tr.Subject(key) {
		t.Fatalf("leader get by seq: %+v %v %v", e, found, err)
	}
	e, found, err = f.tr.leaderGet(ctx(t), 0, f.tr.Subject(key))
	if err != nil || !found || e.n != 2 || e.time.IsZero() {
		t.Fatalf("leader get last: %+v %v %v", e, found, err)
	}
	if _, found, err := f.tr.leaderGet(ctx(t), 0, f.tr.Subject("agent.none")); err != nil || found {
		t.Fatalf("leader get of an empty subject: %v %v", found, err)
	}
	st, _ := f.js.Stream(ctx(t), "SB_TRANSCRIPTS")
	if err := st.DeleteMsg(ctx(t), es[1].Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tr.Read(ctx(t), key, 0, 3); !errors.Is(err, ErrEntryMissing) {
		t.Fatalf("read over a hole: %v", err)
	}
	if err := st.Purge(ctx(t), jetstream.WithPurgeSubject(f.tr.Subject(key))); err != nil {
		t.Fatal(err)
	}
	if c, err := f.tr.Count(ctx(t), key); err != nil || c != 0 {
		t.Fatalf("count after torn delete: %d %v", c, err)
	}
}

func TestCloseAndDeleteIdempotent(t *testing.T) {
	f := newFixture(t)
	if err := f.tr.Delete(ctx(t), "agent.main.none"); err != nil {
		t.Fatalf("delete of an empty session: %v", err)
	}
	f.appendN("agent.main.main", 0, 1)
	f.tr.Close()
	if _, err := f.tr.Count(ctx(t), "agent.main.main"); !errors.Is(err, ErrClosed) {
		t.Fatalf("count after close: %v", err)
	}
}

// TailCached skips the direct gets of the entries the caller holds: they
// come back with their number and sequence only, every other entry as Tail
// returns it, across a sealed chunk and the head's tail, with the newest
// entry (read by the probe) included.
func TestTailCachedSkipsHeldEntries(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.cached"
	f.appendN(key, 0, 150)
	full, total, err := f.tr.Tail(ctx(t), key, 100, 3)
	if err != nil || total != 150 || len(full) != 100 {
		t.Fatalf("tail: %d entries of %d, %v", len(full), total, err)
	}
	held := map[uint64]uint64{} // seq -> n: every third entry
	for i, e := range full {
		if i%3 == 0 {
			held[e.Seq] = e.N
		}
	}
	asked := 0
	got, total2, err := f.tr.TailCached(ctx(t), key, 100, 3, func(seq, n uint64) bool {
		asked++
		hn, ok := held[seq]
		return ok && hn == n
	})
	if err != nil || total2 != total || len(got) != len(full) || asked == 0 {
		t.Fatalf("tail cached: %d entries of %d (asked %d), %v", len(got), total2, asked, err)
	}
	for i, e := range got {
		if e.N != full[i].N || e.Seq != full[i].Seq {
			t.Fatalf("entry %d: n %d seq %d, want n %d seq %d", i, e.N, e.Seq, full[i].N, full[i].Seq)
		}
		if _, isHeld := held[e.Seq]; isHeld != (e.Data == nil) {
			t.Fatalf("entry %d (held %v) came back with %d bytes", i, isHeld, len(e.Data))
		}
		if e.Data != nil && !bytes.Equal(e.Data, full[i].Data) {
			t.Fatalf("entry %d: %s, want %s", i, e.Data, full[i].Data)
		}
	}
	if g := f.tr.Generation(); g != 0 {
		t.Fatalf("generation %d before any recreation", g)
	}
	// recreating the stream (after an operator deleted it) starts a new
	// generation: what was kept under the old sequences must not serve
	if err := f.tr.Recreate(ctx(t), bus.NewNames("").TranscriptsStream()); err != nil {
		t.Fatal(err)
	}
	if g := f.tr.Generation(); g != 1 {
		t.Fatalf("generation %d after a recreation, want 1", g)
	}
}

// Newest reads the newest entry alone (a session whose key extends this
// one does not answer for it) and passes the caller's own requests
// through in the same wave.
func TestNewest(t *testing.T) {
	f := newFixture(t)
	const key = "agent.main.main"
	also := &nats.Msg{Subject: "$JS.API.DIRECT.GET.SB_TRANSCRIPTS.sb.tr.nowhere"}
	check := func(step string, wantFound bool, wantN int) {
		t.Helper()
		e, found, replies, err := f.tr.Newest(ctx(t), key, also)
		if err != nil || found != wantFound {
			t.Fatalf("%s: found %v err %v, want found %v", step, found, err, wantFound)
		}
		if found && (e.N != uint64(wantN) || string(e.Data) != string(body(key, wantN)) || e.Seq == 0) {
			t.Fatalf("%s: newest %d seq %d %s, want entry %d", step, e.N, e.Seq, e.Data, wantN)
		}
		if len(replies) != 1 || replies[0].Header.Get("Status") != "404" {
			t.Fatalf("%s: the passed request's reply: %v", step, replies)
		}
	}
	check("empty", false, 0)
	f.appendN(key, 0, 3)
	f.appendN(key+".x", 0, 1)
	check("appended", true, 2)
	if err := f.tr.Delete(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	check("deleted", false, 0)
}
