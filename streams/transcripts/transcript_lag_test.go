package transcripts

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// headRev is the stored head's KV revision (0: none).
func (f *fixture) headRev(key string) uint64 {
	f.t.Helper()
	e, err := f.kv.Get(ctx(f.t), "h."+key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return e.Revision()
}

// A cursor's writer leaves the stored head behind until FlushDue; every
// reader (a store of its own: no hints) still reads the whole transcript,
// each page right, without writing the head: the newest entry lists what
// the head lacks. A second writer's cursor takes the gap over and its
// Flush writes the head and every chunk the gap sealed.
func TestLaggingHeadReadsWithoutWrites(t *testing.T) {
	f := newFixture(t)
	for _, from := range []int{0, 40, 60, 130} {
		t.Run(fmt.Sprint("from ", from), func(t *testing.T) {
			key := fmt.Sprintf("agent.main.lag%d", from)
			f.appendN(key, 0, from)
			c, err := f.tr.OpenCursor(ctx(t), key, true)
			if err != nil {
				t.Fatal(err)
			}
			total := from
			for !c.FlushDue() {
				if _, _, err := f.tr.AppendAt(ctx(t), c, "", body(key, total)); err != nil {
					t.Fatal(err)
				}
				total++
			}
			if c.Lag() != total-from {
				t.Fatalf("lag %d, want %d", c.Lag(), total-from)
			}
			rev := f.headRev(key)
			f.checkIndex(key, uint64(from))

			reader, err := Open(ctx(t), f.nc, f.js, bus.NewNames(""))
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			readAll(t, reader, key, total)
			if got := f.headRev(key); got != rev {
				t.Fatalf("reads wrote the head: revision %d, was %d", got, rev)
			}
			f.checkIndex(key, uint64(from))

			// another writer (a second gateway) goes on from the newest entry
			c2, err := reader.OpenCursor(ctx(t), key, true)
			if err != nil {
				t.Fatal(err)
			}
			if c2.Len() != uint64(total) || c2.Lag() != total-from {
				t.Fatalf("second cursor: len %d lag %d, want %d and %d", c2.Len(), c2.Lag(), total, total-from)
			}
			for range 2 {
				if _, _, err := reader.AppendAt(ctx(t), c2, "", body(key, total)); err != nil {
					t.Fatal(err)
				}
				total++
			}
			readAll(t, f.tr, key, total)
			if err := reader.Flush(ctx(t), c2); err != nil {
				t.Fatal(err)
			}
			f.checkIndex(key, uint64(total))
			// an append outside any cursor, after a head that lags again
			c3, err := f.tr.OpenCursor(ctx(t), key, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.tr.AppendAt(ctx(t), c3, "", body(key, total)); err != nil {
				t.Fatal(err)
			}
			total++
			f.appendN(key, total, 1)
			total++
			f.checkAll(key, uint64(total))
		})
	}
}

// readAll checks every page shape a reader asks for against total entries.
func readAll(t *testing.T, s *Store, key string, total int) {
	t.Helper()
	n, err := s.Count(ctx(t), key)
	if err != nil || n != uint64(total) {
		t.Fatalf("count %d, %v; want %d", n, err, total)
	}
	es, err := s.Read(ctx(t), key, 0, uint64(total))
	if err != nil {
		t.Fatal(err)
	}
	checkRange(t, key, es, 0, uint64(total))
	for _, off := range []int{0, 5, 40, 70, total - 3} {
		if off < 0 || off >= total {
			continue
		}
		for range 2 { // the second read of a deep page is the prefetched one
			es, n, err := s.Tail(ctx(t), key, 10, uint64(off))
			if err != nil || n != uint64(total) {
				t.Fatalf("tail offset %d: total %d, %v; want %d", off, n, err, total)
			}
			to := total - off
			checkRange(t, key, es, uint64(max(0, to-10)), uint64(to))
		}
	}
}

func TestVirtualHeadRefusesWhatItCannotProve(t *testing.T) {
	stored := &head{V: 1, Count: 64, Last: 500, Tail: seqRange(1, 64)}
	top := func(n, seq uint64, hdr string) *rawEntry { return &rawEntry{n: n, seq: seq, unindexed: hdr} }
	ok := encodeUnindexed(64, 500, []uint64{501, 503, 510})
	if v := virtualHead(stored, top(67, 520, ok)); v == nil || v.Count != 68 || v.Last != 520 || len(v.unindexed) != 4 {
		t.Fatalf("a listed gap: %+v", v)
	}
	for name, tc := range map[string]*rawEntry{
		"no list":                    top(67, 520, ""),
		"malformed":                  top(67, 520, "64:500:x"),
		"another head":               top(67, 520, encodeUnindexed(64, 499, []uint64{501, 503, 510})),
		"count does not reach top":   top(68, 520, ok),
		"top before its list":        top(67, 505, ok),
		"list from a later head":     top(67, 520, encodeUnindexed(65, 501, []uint64{503, 510})),
		"more than a chunk listed":   top(64+ChunkSize+1, 9999, encodeUnindexed(64, 500, seqRange(501, ChunkSize+1))),
		"zero delta (not ascending)": top(66, 520, "64:500:501,0"),
	} {
		if v := virtualHead(stored, tc); v != nil {
			t.Errorf("%s: extended to %d entries", name, v.Count)
		}
	}
	// 127 entries stored (chunk 0 written, chunk 1 in the tail): a gap of
	// 64 more would seal chunk 1 and 2, and chunk 1 is in no stored index
	long := &head{V: 1, Count: 127, Last: 900, Tail: seqRange(837, 63+ChunkSize)}
	if v := virtualHead(long, top(127+ChunkSize, 9999, encodeUnindexed(127, 900, seqRange(901, ChunkSize)))); v != nil {
		t.Errorf("past one chunk edge: extended to %d entries", v.Count)
	}
	if v := virtualHead(long, top(127+ChunkSize-1, 9999, encodeUnindexed(127, 900, seqRange(901, ChunkSize-1)))); v == nil {
		t.Error("a gap up to one chunk edge was refused")
	}
	c, l, s, parsed := parseUnindexed(ok)
	if !parsed || c != 64 || l != 500 || fmt.Sprint(s) != "[501 503 510]" {
		t.Fatalf("round trip: %d %d %v %v", c, l, s, parsed)
	}
}

func seqRange(from uint64, n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = from + uint64(i)
	}
	return s
}
