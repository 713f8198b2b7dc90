package sessions

import (
	"log/slog"
	"testing"
)

// BenchmarkIndexSearch is sessions_list's search over the index at 100k
// and 1M sessions (a label that one session has): its cost should not grow
// with the store. Run it alone: the 1M case holds ~2 GB.
//
//	go test -run '^$' -bench IndexSearch ./kv/sessions/
func BenchmarkIndexSearch(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		kes := sampleKEs(n)
		ix := bareIndex(slog.Default(), nil)
		for _, ke := range kes {
			ix.apply(ke)
		}
		kes = nil
		i := n - 1 - (n-1)%10 - 1
		needle := SearchNeedle(Sample(i, 1_790_000_000_000).Label)
		if needle == "" {
			needle = SearchNeedle(Sample(i, 1_790_000_000_000).SessionID)
		}
		b.Run(map[int]string{100_000: "100k", 1_000_000: "1m"}[n], func(b *testing.B) {
			for b.Loop() {
				found := 0
				ix.EachSearch(needle, func(*Entry) bool { found++; return true })
				if found != 1 {
					b.Fatalf("%d found for %q", found, needle)
				}
			}
		})
	}
}
