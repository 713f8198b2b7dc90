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
	savedMin, savedProbe := denseMin, probeMin
	t.Cleanup(func() { denseMin, probeMin = savedMin, savedProbe })
	denseMin = 8

	ix := bareIndex(slog.New(slog.DiscardHandler), nil)
	c := newChurn(t, 5, ix.apply)
	dense := 0
	for round := range 8 {
		probeMin = []int{1, 1 << 30}[round%2] // each way of intersecting two sparse lists
		c.round(round)
		c.check(ix, round)
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

// churn makes random sessions and changes to them, handing each change,
// as the watch would bring it, to emit; cur is every live entry as the
// last change left it.
type churn struct {
	t    *testing.T
	rng  *rand.Rand
	emit func(jetstream.KeyValueEntry)
	rev  uint64
	live []string
	cur  map[string]*Entry
}

var churnPieces = []string{"a", "B", "cd", "Ab", "task ", "research", "Grüße", "STRASSE", "straße", "ẞ", "İstanbul", "istanbul",
	"ΣΊΣΥΦΟΣ", "σίσυφος", "ς", "K", "k", "ǅ", "ǆ", "Ω", "ω", "日本", "😀", ":", "-", "0", "42", "x", "telegram", "ǰ", "Ⱥ", "ⱥ"}

func newChurn(t *testing.T, seed uint64, emit func(jetstream.KeyValueEntry)) *churn {
	return &churn{t: t, rng: rand.New(rand.NewPCG(seed, 23)), emit: emit, cur: map[string]*Entry{}}
}

func (c *churn) str(n int) string {
	var b strings.Builder
	for range c.rng.IntN(n) {
		b.WriteString(churnPieces[c.rng.IntN(len(churnPieces))])
	}
	return b.String()
}

func (c *churn) random(key string) *Entry {
	e := &Entry{Key: key, UpdatedAt: c.rng.Int64N(500), DisplayName: c.str(4), Label: c.str(3), Subject: c.str(3)}
	if c.rng.IntN(4) > 0 {
		e.SessionID = fmt.Sprintf("%s-%d", c.str(2), c.rng.IntN(40))
	}
	return e
}

func (c *churn) put(e *Entry) {
	v, err := json.Marshal(e)
	if err != nil {
		c.t.Fatal(err)
	}
	c.rev++
	c.cur[e.Key] = e
	c.emit(opKE{fakeKE{key: bus.EncodeKey(e.Key), val: v, rev: c.rev}, jetstream.KeyValuePut})
}

func (c *churn) del(key string) {
	c.rev++
	delete(c.cur, key)
	c.emit(opKE{fakeKE{key: bus.EncodeKey(key), rev: c.rev}, jetstream.KeyValueDelete})
}

// round creates 600 sessions, changes 500 (half of them keeping their
// searched text) and deletes some, a third of which come back at once, in
// a reused slot; late rounds delete more, so lists shrink back to sparse.
func (c *churn) round(round int) {
	for i := range 600 {
		key := fmt.Sprintf("agent:main:%s:%d:%d", c.str(2), round, i)
		c.put(c.random(key))
		c.live = append(c.live, key)
	}
	for range 500 {
		e := *c.cur[c.live[c.rng.IntN(len(c.live))]]
		if c.rng.IntN(2) == 0 {
			e.UpdatedAt = c.rng.Int64N(500) // searched text unchanged
		} else {
			n := c.random(e.Key)
			e.DisplayName, e.Label, e.Subject, e.SessionID = n.DisplayName, n.Label, n.Subject, n.SessionID
		}
		c.put(&e)
	}
	for range 150 + 150*(round/4) {
		i := c.rng.IntN(len(c.live))
		c.del(c.live[i])
		if c.rng.IntN(3) == 0 {
			c.put(c.random(c.live[i]))
		} else {
			c.live = slices.Delete(c.live, i, i+1)
		}
	}
}

// queries are needles that fold oddly, match nothing or everything, and
// pieces of live sessions' fields cased at random.
func (c *churn) queries() []string {
	qs := []string{"a", "ab", "k", "K", "ß", "ss", "İ", "i̇", "σ", "ς", "Σ", "ǅ", "ǆ", "nothing at all", "task research",
		":", "agent:", "agent:main:", "telegram", "research", "ⱥ", "Ⱥ"}
	for range 150 {
		if q, ok := fieldPiece(c.rng, c.cur[c.live[c.rng.IntN(len(c.live))]]); ok {
			qs = append(qs, q)
		}
	}
	return qs
}

// check fails unless ix's lists hold exactly the live entries' trigrams
// and every query finds what a walk finds, whether EachSearch sorts its
// candidates or walks the order with them, and when stopped early.
func (c *churn) check(ix *Index, round int) {
	t := c.t
	t.Helper()
	checkPostings(t, ix)
	saved := searchSortMax
	defer func() { searchSortMax = saved }()
	for _, q := range c.queries() {
		want := bruteSearch(ix, q)
		for _, sortMax := range []int{saved, 0} {
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
	}
}

// checkPostings fails unless ix's trigram lists hold exactly the live
// slots of each trigram, with counts to match, sparse lists sorted.
func checkPostings(t *testing.T, ix *Index) {
	t.Helper()
	checkLists(t, ix.slots, &ix.search)
}

// checkLists fails unless x holds exactly the slots of each trigram of
// the entries in slots, with counts to match, sparse lists sorted.
func checkLists(t *testing.T, slots []*Entry, x *postings) {
	t.Helper()
	want := map[trigram][]uint32{}
	for slot, e := range slots {
		if e == nil {
			continue
		}
		for _, g := range entryTrigrams(e) {
			want[g] = append(want[g], uint32(slot))
		}
	}
	if len(want) != len(x.lists) {
		t.Fatalf("%d trigram lists, want %d", len(x.lists), len(want))
	}
	for g, slots := range want {
		p := x.lists[g]
		if p == nil {
			t.Fatalf("no list for trigram %06x", g)
		}
		got := p.ids
		if p.bits != nil {
			got = p.sparseCopy()
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

// probeIntersect finds what a merge finds, whatever the sizes, including
// slots of b past a's last (beyond the bitmap it marks) and after a
// shorter bitmap went back to the pool; the bitmap it keeps comes back
// clean (a stale bit would show as a slot a does not have).
func TestProbeIntersect(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		max := []int{64, 500, 5000, 200_000}[i%4]
		a := randomSet(rng, 1+rng.IntN(600), max)
		b := randomSet(rng, rng.IntN(900), max+rng.IntN(2)*max)
		want := intersectInto(slices.Clone(a), b)
		if got := probeIntersect(a, b); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("probe %v ∩ %v = %v, want %v", a, b, got, want)
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

// Four digits in a row are filed as a digit quad, in fields and needles
// alike, and only four in a row: a needle is found wherever its digits
// sit, across separators and case-folded text too.
func TestDigitQuads(t *testing.T) {
	q := func(v int) trigram { return quadTag<<24 | trigram(v) }
	if got, want := appendQuads(nil, "u0999989-12-345x6789"), []trigram{q(999), q(9999), q(9998), q(9989), q(6789)}; !slices.Equal(got, want) {
		t.Fatalf("quads %v, want %v", got, want)
	}
	ix := bareIndex(slog.New(slog.DiscardHandler), nil)
	for i, key := range []string{"agent:main:telegram:direct:u0999989", "agent:main:x:direct:12-34", "agent:main:İ:direct:00042017"} {
		v, _ := json.Marshal(&Entry{Key: key, SessionID: fmt.Sprintf("id-%d", i)})
		ix.apply(fakeKE{bus.EncodeKey(key), v, uint64(i + 1), 0})
	}
	for needle, want := range map[string]int{"9998": 1, "u0999989": 1, "12-34": 1, "2-3": 1, "0004": 1, "İ:DIRECT:0004": 1, "99899": 0, "1234": 0} {
		found := 0
		ix.EachSearch(SearchNeedle(needle), func(*Entry) bool { found++; return true })
		if found != want {
			t.Errorf("search %q found %d, want %d", needle, found, want)
		}
	}
}
