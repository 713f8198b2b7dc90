package transcripts

import "testing"

// A page back in a long transcript asked for again reads its chunks in the
// head's wave; the page is the same, and a transcript that grew in between
// is read as usual.
func TestTailPrefetchedPages(t *testing.T) {
	f := newFixture(t)
	key := "agent.main.pages"
	load := func(from, to int) {
		n, err := f.tr.BulkLoad(ctx(t), func(yield func(string, []byte) bool) {
			for i := from; i < to; i++ {
				if !yield(key, body(key, i)) {
					return
				}
			}
		})
		if err != nil || n != uint64(to-from) {
			t.Fatalf("load: %d %v", n, err)
		}
	}
	pre := func() ([]Entry, uint64, bool, error) {
		p, err := f.tr.getPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer f.tr.putPipe(p)
		return f.tr.tailPrefetched(ctx(t), p, key, 50, 900, nil)
	}
	load(0, 1000)
	es, total, err := f.tr.Tail(ctx(t), key, 50, 900) // learns the length
	if err != nil || total != 1000 {
		t.Fatal(total, err)
	}
	checkRange(t, key, es, 50, 100)
	es, total, ok, err := pre()
	if !ok || err != nil || total != 1000 {
		t.Fatalf("second page not read in one wave: ok %v total %d err %v", ok, total, err)
	}
	checkRange(t, key, es, 50, 100)
	load(1000, 1070)
	if _, _, ok, err := pre(); ok || err != nil {
		t.Fatalf("a grown transcript taken from a stale length: ok %v err %v", ok, err)
	}
	es, total, err = f.tr.Tail(ctx(t), key, 50, 900)
	if err != nil || total != 1070 {
		t.Fatal(total, err)
	}
	checkRange(t, key, es, 120, 170)
}
