package sessions

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// The trigram lists find exactly what a walk over every entry finds, in
// the same order, over thousands of sessions whose keys, labels, display
// names, subjects and sessionIds come from Unicode pieces that case-fold
// in odd ways, through relabels, updates that keep the searched text,
// deletes and re-creates in reused slots; with lists small enough to turn
// dense and back, and each way EachSearch uses the candidates. After every
// round the lists hold exactly the trigrams of the live entries.
func TestTrigramSearchMatchesScan(t *testing.T) {
	savedMin, savedSort := denseMin, searchSortMax
	t.Cleanup(func() { denseMin, searchSortMax = savedMin, savedSort })
	denseMin = 8

	ix := bareIndex(slog.New(slog.DiscardHandler), nil)
	rng := rand.New(rand.NewPCG(5, 23))
	pieces := []string{"a", "B", "cd", "Ab", "task ", "research", "Grüße", "STRASSE", "straße", "ẞ", "İstanbul", "istanbul",
		"ΣΊΣΥΦΟΣ", "σίσυφος", "ς", "K", "k", "ǅ", "ǆ", "Ω", "ω", "日本", "😀", ":", "-", "0", "42", "x", "telegram", "ǰ", "Ⱥ", "ⱥ"}
	str := func(n int) string {
		var b strings.Builder
		for range rng.IntN(n) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	rev := uint64(0)
	put := func(e *Entry) {
		v, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		rev++
		ix.apply(opKE{fakeKE{key: bus.EncodeKey(e.Key), val: v, rev: rev}, jetstream.KeyValuePut})
	}
	del := func(key string) {
		rev++
		ix.apply(opKE{fakeKE{key: bus.EncodeKey(key), rev: rev}, jetstream.KeyValueDelete})
	}
	random := func(key string) *Entry {
		e := &Entry{Key: key, UpdatedAt: rng.Int64N(500), DisplayName: str(4), Label: str(3), Subject: str(3)}
		if rng.IntN(4) > 0 {
			e.SessionID = fmt.Sprintf("%s-%d", str(2), rng.IntN(40))
		}
		return e
	}
	var live []string
	queries := func() []string {
		qs := []string{"a", "ab", "k", "K", "ß", "ss", "İ", "i̇", "σ", "ς", "Σ", "ǅ", "ǆ", "nothing at all", "task research",
			":", "agent:", "agent:main:", "telegram", "research", "ⱥ", "Ⱥ"}
		for range 150 {
			e := ix.Get(live[rng.IntN(len(live))])
			f := []string{e.DisplayName, e.Label, e.Subject, e.SessionID, e.Key}[rng.IntN(5)]
			if f == "" {
				continue
			}
			r := []rune(f)
			i := rng.IntN(len(r))
			sub := string(r[i : i+1+rng.IntN(len(r)-i)])
			switch rng.IntN(3) {
			case 0:
				sub = strings.ToUpper(sub)
			case 1:
				sub = strings.ToLower(sub)
			}
			qs = append(qs, sub)
		}
		return qs
	}
	check := func(round int) {
		t.Helper()
		checkPostings(t, ix)
		for _, q := range queries() {
			want := bruteSearch(ix, q)
			for _, sortMax := range []int{savedSort, 0} {
				searchSortMax = sortMax
				if got := indexSearch(ix, q, 1<<30); !slices.Equal(got, want) {
					t.Fatalf("round %d (sort max %d) search %q:\n got %v\nwant %v", round, sortMax, q, got, want)
				}
				if len(want) > 3 {
					if got := indexSearch(ix, q, 3); !slices.Equal(got, want[:3]) {
						t.Fatalf("round %d (sort max %d) search %q stopped after 3: %v, want %v", round, sortMax, q, got, want[:3])
					}
				}
			}
			searchSortMax = savedSort
		}
	}
	dense := 0
	for round := range 8 {
		for i := range 600 {
			key := fmt.Sprintf("agent:main:%s:%d:%d", str(2), round, i)
			put(random(key))
			live = append(live, key)
		}
		for range 500 {
			e := *ix.Get(live[rng.IntN(len(live))])
			if rng.IntN(2) == 0 {
				e.UpdatedAt = rng.Int64N(500) // searched text unchanged
			} else {
				n := random(e.Key)
				e.DisplayName, e.Label, e.Subject, e.SessionID = n.DisplayName, n.Label, n.Subject, n.SessionID
			}
			put(&e)
		}
		// many deletes in late rounds, so lists shrink back to sparse
		for range 150 + 150*(round/4) {
			i := rng.IntN(len(live))
			del(live[i])
			if rng.IntN(3) == 0 { // the same key again, in a reused slot
				put(random(live[i]))
			} else {
				live = slices.Delete(live, i, i+1)
			}
		}
		check(round)
		for _, p := range ix.search.lists {
			if p.bits != nil {
				dense++
			}
		}
	}
	if dense == 0 {
		t.Fatal("no list turned dense: the bitmap paths went untested")
	}
}

// checkPostings fails unless ix's trigram lists hold exactly the live
// slots of each trigram, with counts to match, sparse lists sorted.
func checkPostings(t *testing.T, ix *Index) {
	t.Helper()
	want := map[trigram][]uint32{}
	for slot, e := range ix.slots {
		if e == nil {
			continue
		}
		for _, g := range entryTrigrams(e) {
			want[g] = append(want[g], uint32(slot))
		}
	}
	if len(want) != len(ix.search.lists) {
		t.Fatalf("%d trigram lists, want %d", len(ix.search.lists), len(want))
	}
	for g, slots := range want {
		p := ix.search.lists[g]
		if p == nil {
			t.Fatalf("no list for trigram %06x", g)
		}
		got := p.ids
		if p.bits != nil {
			got = (&posting{bits: p.bits, n: p.n}).sparseCopy()
		}
		if !slices.Equal(got, slots) || p.n != len(slots) {
			t.Fatalf("trigram %06x: list %v (n %d, dense %v), want %v", g, got, p.n, p.bits != nil, slots)
		}
	}
}

func (p *posting) sparseCopy() []uint32 {
	c := &posting{bits: slices.Clone(p.bits), n: p.n}
	c.toSparse()
	return c.ids
}

func TestIntersectInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		a := randomSet(rng, rng.IntN(20), 200)
		b := randomSet(rng, rng.IntN([]int{30, 300}[rng.IntN(2)]), 400)
		var want []uint32
		for _, s := range a {
			if _, ok := slices.BinarySearch(b, s); ok {
				want = append(want, s)
			}
		}
		if got := intersectInto(slices.Clone(a), b); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("%v ∩ %v = %v, want %v", a, b, got, want)
		}
	}
}

func randomSet(rng *rand.Rand, n, max int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(rng.IntN(max))
	}
	slices.Sort(s)
	return slices.Compact(s)
}
