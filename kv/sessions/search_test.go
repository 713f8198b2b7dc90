package sessions

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
)

// bruteSearch is the reference's search stated directly: walk every entry
// newest first, keep those where the lower-cased needle is a substring of
// one of the lower-cased displayName, label, subject, sessionId or key.
func bruteSearch(ix *Index, q string) []string {
	needle := strings.ToLower(q)
	var out []string
	ix.Each(func(e *Entry) bool {
		for _, f := range []string{e.DisplayName, e.Label, e.Subject, e.SessionID, e.Key} {
			if strings.Contains(strings.ToLower(f), needle) {
				out = append(out, e.Key)
				break
			}
		}
		return true
	})
	return out
}

// fieldPiece is a random run of one of e's searched fields, upper-cased,
// lower-cased or left as it is at random; ok is false when the field
// picked is empty.
func fieldPiece(rng *rand.Rand, e *Entry) (string, bool) {
	fs := e.searchFields()
	r := []rune(fs[rng.IntN(len(fs))])
	if len(r) == 0 {
		return "", false
	}
	i := rng.IntN(len(r))
	sub := string(r[i : i+1+rng.IntN(len(r)-i)])
	switch rng.IntN(3) {
	case 0:
		sub = strings.ToUpper(sub)
	case 1:
		sub = strings.ToLower(sub)
	}
	return sub, true
}

func indexSearch(ix *Index, q string, stopAfter int) []string {
	var out []string
	ix.EachSearch(SearchNeedle(q), func(e *Entry) bool {
		out = append(out, e.Key)
		return len(out) < stopAfter
	})
	return out
}

// EachSearch finds exactly what a walk over every entry finds, in the same
// order, through creates, updates that change and keep the searched text,
// deletes and re-creates, with Unicode case folding (Kelvin sign, dotted
// capital I, final sigma, titlecase digraphs, sharp s), both when it sorts
// its candidates and when it walks the order with them.
func TestEachSearchIsExact(t *testing.T) {
	ctx, _, store, ix := indexed(t)
	rng := rand.New(rand.NewPCG(17, 17))
	pieces := []string{"a", "B", "cd", "Ab", "task ", "research", "Grüße", "STRASSE", "straße", "ẞ", "İstanbul", "istanbul",
		"ΣΊΣΥΦΟΣ", "σίσυφος", "ς", "K", "k", "ǅ", "ǆ", "Ω", "ω", "日本", "😀", ":", "-", "0", "42", "x"}
	str := func(n int) string {
		var b strings.Builder
		for range rng.IntN(n) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	var live []string
	random := func(key string) *Entry {
		e := &Entry{Key: key, UpdatedAt: rng.Int64N(50), DisplayName: str(4), Label: str(3), Subject: str(3)}
		if rng.IntN(4) > 0 {
			e.SessionID = fmt.Sprintf("%s-%d", str(2), rng.IntN(40)) // some shared
		}
		return e
	}
	queries := func() []string {
		qs := []string{"a", "ab", "k", "K", "ß", "ss", "İ", "i̇", "σ", "ς", "Σ", "ǅ", "ǆ", "nothing at all", "task research", ":", "agent:"}
		for range 60 {
			if len(live) == 0 {
				break
			}
			if q, ok := fieldPiece(rng, ix.Get(live[rng.IntN(len(live))])); ok {
				qs = append(qs, q)
			}
		}
		return qs
	}
	check := func(round int) {
		t.Helper()
		if err := ix.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for _, q := range queries() {
			want := bruteSearch(ix, q)
			if got := indexSearch(ix, q, 1<<30); !slices.Equal(got, want) {
				t.Fatalf("round %d search %q:\n got %v\nwant %v", round, q, got, want)
			}
			if len(want) > 2 {
				if got := indexSearch(ix, q, 2); !slices.Equal(got, want[:2]) {
					t.Fatalf("round %d search %q stopped after 2: %v, want %v", round, q, got, want[:2])
				}
			}
		}
	}
	for round := range 6 {
		for i := range 80 {
			key := fmt.Sprintf("agent:main:%s:%d:%d", str(2), round, i)
			if _, err := store.Create(ctx, random(key)); err != nil {
				t.Fatal(err)
			}
			live = append(live, key)
		}
		for range 60 {
			key := live[rng.IntN(len(live))]
			if _, _, err := store.Update(ctx, key, func(e *Entry) error {
				if rng.IntN(2) == 0 {
					e.UpdatedAt = rng.Int64N(50) // searched text unchanged
				} else {
					n := random(key)
					e.DisplayName, e.Label, e.Subject, e.SessionID = n.DisplayName, n.Label, n.Subject, n.SessionID
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		for range 30 {
			i := rng.IntN(len(live))
			if err := store.Delete(ctx, live[i]); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(2) == 0 { // the same key again, in a reused slot
				if _, err := store.Create(ctx, random(live[i])); err != nil {
					t.Fatal(err)
				}
			} else {
				live = slices.Delete(live, i, i+1)
			}
		}
		check(round)
		// the other way to use the candidates: walk the order
		saved := searchSortMax
		searchSortMax = 0
		check(round)
		searchSortMax = saved
	}
}

// An entry's trigrams are every trigram of its lower-cased fields, so a
// needle's trigrams are among those of every entry it matches.
func TestTrigramsCoverMatches(t *testing.T) {
	e := &Entry{Key: "agent:main:telegram:direct:u1", DisplayName: "Grüße aus KÖLN", Label: "ΣΊΣΥΦΟΣ", SessionID: "ABC-def"}
	have := entryTrigrams(e)
	for _, q := range []string{"grüße", "köln", "σίσυφοσ", "abc-d", "TELEGRAM:dir", "aus k"} {
		n := SearchNeedle(q)
		if !e.MatchesSearch(n) {
			t.Fatalf("%q should match", q)
		}
		grams, ok := needleTrigrams(n)
		if !ok {
			t.Fatalf("%q has trigrams", q)
		}
		for _, g := range grams {
			if _, found := slices.BinarySearch(have, g); !found {
				t.Fatalf("needle %q has trigram %06x the entry lacks", q, g)
			}
		}
	}
	if _, ok := needleTrigrams("ab"); ok {
		t.Fatal("a two-byte needle has no trigram")
	}
}

// A field shorter than a trigram can lower to one: "Ⱥ" is two bytes and
// lowers to "ⱥ", three. Search finds it, as OpenClaw's lower-and-contains
// does, however the needle is cased.
func TestSearchFindsAShortFieldThatLowersLonger(t *testing.T) {
	ix := bareIndex(slog.New(slog.DiscardHandler), nil)
	for i, e := range []*Entry{{Key: "agent:main:a", DisplayName: "Ⱥ"}, {Key: "agent:main:b", Label: "xȺ"}, {Key: "agent:main:c", Label: "ȾȺ"}} {
		v, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		ix.apply(fakeKE{key: bus.EncodeKey(e.Key), val: v, rev: uint64(i + 1)})
	}
	for q, want := range map[string]string{"ⱥ": "[agent:main:a agent:main:b agent:main:c]", "Ⱥ": "[agent:main:a agent:main:b agent:main:c]", "xⱥ": "[agent:main:b]", "ⱦⱥ": "[agent:main:c]"} {
		if got := fmt.Sprint(indexSearch(ix, q, 10)); got != want {
			t.Errorf("search %q found %s, want %s", q, got, want)
		}
	}
}
