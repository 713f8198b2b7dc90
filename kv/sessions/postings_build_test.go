package sessions

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// The initial load files no trigram per entry; the lists are built in bulk
// after it, in runs per worker, once the index is ready. Searches while it
// loads find nothing (as listing does: nothing is listed before the load
// ends) or, once it is done, exactly what a walk over every entry finds,
// while the lists are built and after; the lists hold exactly
// the live entries' trigrams, dense ones included, and stay exact as live
// changes then add to them and take from them.
func TestBulkBuiltSearchMatchesScan(t *testing.T) {
	savedDense, savedBulk := denseMin, bulkMin
	t.Cleanup(func() { denseMin, bulkMin = savedDense, savedBulk })
	denseMin, bulkMin = 8, 64

	var kes []jetstream.KeyValueEntry
	c := newChurn(t, 7, func(ke jetstream.KeyValueEntry) { kes = append(kes, ke) })
	for round := range 4 { // deletes and re-creates within the load: free and reused slots
		c.round(round)
	}
	queries := c.queries()

	ix := bareIndex(slog.New(slog.DiscardHandler), nil)
	updates := make(chan jetstream.KeyValueEntry, 64)
	go func() {
		for _, ke := range kes {
			updates <- ke
		}
		updates <- nil
	}()
	seen := map[string][][]string{} // by needle, what searches found during the load
	loaded := make(chan struct{})
	var searcher sync.WaitGroup
	searcher.Go(func() {
		for done := false; !done; {
			select {
			case <-loaded:
				done = true // one more pass, after the load
			default:
			}
			for _, q := range queries[:40] {
				seen[q] = append(seen[q], indexSearch(ix, q, 1<<30))
			}
		}
	})
	if !ix.load(context.Background(), updates) {
		t.Fatal("load ended before the end-of-initial-values marker")
	}
	if ix.searching {
		t.Fatal("the load built the trigram lists before the index was ready")
	}
	for _, q := range queries[:40] { // the walk that stands in for the lists
		if got, want := indexSearch(ix, q, 1<<30), bruteSearch(ix, q); !slices.Equal(got, want) {
			t.Fatalf("search %q before the lists were built found %v, want %v", q, got, want)
		}
	}
	ix.buildSearch()
	close(loaded)
	searcher.Wait()

	for q, founds := range seen {
		want := bruteSearch(ix, q)
		for _, got := range founds {
			if len(got) != 0 && !slices.Equal(got, want) {
				t.Fatalf("search %q during the load found %v, want nothing or %v", q, got, want)
			}
		}
		if last := founds[len(founds)-1]; !slices.Equal(last, want) {
			t.Fatalf("search %q right after the load found %v, want %v", q, last, want)
		}
	}
	dense := 0
	for _, p := range ix.search.lists {
		if p.bits != nil {
			dense++
		}
	}
	if dense == 0 {
		t.Fatal("the bulk build made no dense list: its bitmap path went untested")
	}
	c.check(ix, -1)

	// any number of workers builds the same lists: runs split bitmaps at
	// word boundaries and sparse lists at each run's cursor
	for workers := range 6 {
		var x postings
		x.reset()
		x.build(ix.slots, workers)
		checkLists(t, ix.slots, &x)
	}

	c.emit = ix.apply
	for round := 4; round < 8; round++ {
		c.round(round)
		c.check(ix, round)
	}
}

// BenchmarkTrigramBuild compares what filing 200k sessions' trigrams costs
// under the index lock: built in bulk at the load's end, and added slot by
// slot as the load filed them before (their trigrams listed beforehand,
// off the lock, as the load's decoders did).
//
//	go test -run '^$' -bench TrigramBuild ./kv/sessions/
func BenchmarkTrigramBuild(b *testing.B) {
	n := 200_000
	slots := make([]*Entry, n)
	grams := make([][]trigram, n)
	for i := range slots {
		slots[i] = Sample(i, 1_790_000_000_000)
		grams[i] = entryTrigrams(slots[i])
	}
	b.Run("bulk", func(b *testing.B) {
		for b.Loop() {
			var x postings
			x.reset()
			x.build(slots, runtime.GOMAXPROCS(0))
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
	})
	b.Run("one-by-one", func(b *testing.B) {
		for b.Loop() {
			var x postings
			x.reset()
			for s, g := range grams {
				x.add(uint32(s), g, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
	})
}
