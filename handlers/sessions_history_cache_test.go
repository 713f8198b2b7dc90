package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// variedTranscript is one session's entries covering every branch of the
// projection: tool messages, dropped assistant replies, undecodable and
// non-object entries, redaction, truncation, heavy fields, the run marker,
// an existing __openclaw key, exact numbers, HTML-sensitive characters,
// U+2028, invalid UTF-8 and a message over the 80 KiB cap. Stream sequences
// are spread out, as interleaved sessions have them.
func variedTranscript() []transcripts.Entry {
	var blocks []string
	for i := 0; i < 25; i++ {
		blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":%q}`, strings.Repeat("c", 4000)))
	}
	lines := []string{
		`{"role":"user","content":"my key is OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx <b>&amp;</b> a` + "\u2028" + `b","timestamp":1767225600000}`,
		`{"role":"assistant","content":[{"type":"text","text":"<thinking>hidden</thinking>Done.<tool_call>{\"name\":\"x\"}</tool_call>"}],"usage":{"input":3},"cost":1.50}`,
		`{"role":"toolResult","content":"tool output with ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"}`,
		`{"role":"tool","content":[{"type":"text","text":"raw tool"}],"details":{"x":1}}`,
		`{"role":"assistant","phase":"commentary","content":"thinking aloud"}`,
		`{"role":"assistant","content":"  NO_REPLY  "}`,
		`{"role":"assistant","content":[{"type":"text","text":"NO_REPLY"},{"type":"toolCall","name":"exec","arguments":{"cmd":"ls"}}]}`,
		`[1,2,3]`,
		`"just a string"`,
		`null`,
		`{not json`,
		fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("a", 4001)),
		`{"role":"user","content":[` + strings.Join(blocks, ",") + `]}`,
		`{"role":"assistant","content":"run output","__sessionbus":{"run":"r1","i":0}}`,
		`{"role":"user","content":"has meta","__openclaw":{"seq":99,"x":true}}`,
		`{"role":"user","content":"numbers","n":12345678901234567890,"f":1e3,"g":-0.0,"Zeta":1,"A":[],"b":{}}`,
		`{"role":"assistant","content":[{"type":"thinking","thinking":"plan with token=abcdefghijklmnopqrstuv","thinkingSignature":"sig"},{"type":"text","text":"ok 👍 café"}]}`,
		"{\"role\":\"user\",\"content\":\"bad \xff utf8\"}",
		`{"role":"user","content":"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJiZW5jaCJ9.c2ln"}`,
		`{"role":"assistant","text":"<final>top-level text</final> & more"}`,
	}
	out := make([]transcripts.Entry, len(lines))
	for i, l := range lines {
		out[i] = transcripts.Entry{N: uint64(i), Seq: uint64(1000 + 7*i), Data: []byte(l)}
	}
	return out
}

func testDeps(t *testing.T, maxBytes int) *Deps {
	t.Helper()
	return &Deps{Redactor: sanitize.DefaultRedactor(), views: newViewCache(maxBytes)}
}

// tail is the window Transcripts.Tail returns for limit and offset.
func tail(all []transcripts.Entry, limit, offset int) []transcripts.Entry {
	if offset >= len(all) {
		return nil
	}
	to := len(all) - offset
	return all[to-min(limit, to) : to]
}

// TestHistoryRepliesSameCachedOrNot: over a varied transcript and every
// combination of limit, offset and includeTools, the reply built from cached
// views (cold, then warm) is byte for byte the reply the uncached path
// encodes with json.Marshal, as sessions_history did before the cache.
func TestHistoryRepliesSameCachedOrNot(t *testing.T) {
	all := variedTranscript()
	d := testDeps(t, historyCacheMaxBytes)
	calls := 0
	for _, includeTools := range []bool{false, true} {
		for _, paged := range []bool{false, true} {
			for _, limit := range []int{1, 2, 3, 7, 50, 1000} {
				offsets := []int{0}
				if paged {
					offsets = []int{0, 1, 2, 5, 11, len(all) - 1, len(all), len(all) + 3}
				}
				for _, offset := range offsets {
					window := tail(all, limit, offset)
					name := fmt.Sprintf("tools=%v paged=%v limit=%d offset=%d", includeTools, paged, limit, offset)
					want, err := json.Marshal(historyPage("agent:main:main", d.sanitizeEntries(window, includeTools, paged), len(window), uint64(len(all)), offset, paged))
					if err != nil {
						t.Fatal(err)
					}
					for _, pass := range []string{"first", "second"} {
						got, err := historyPage("agent:main:main", d.viewsOf(window, includeTools, paged), len(window), uint64(len(all)), offset, paged).encode()
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("%s, %s call:\n got %s\nwant %s", name, pass, got, want)
						}
						calls++
					}
				}
			}
		}
	}
	st := d.HistoryCacheStats()
	if st.Hits == 0 || st.Misses == 0 || st.Entries != 2*len(all) {
		t.Fatalf("after %d calls: %+v, want hits, misses and %d views (each entry with and without seq)", calls, st, 2*len(all))
	}
}

func TestHistoryEncodeMatchesMarshal(t *testing.T) {
	one, two, yes, no := 1, 22, true, false
	msgs := []json.RawMessage{
		json.RawMessage(`{"content":"\u003cb\u003e \u0026 \u2028","role":"user"}`),
		json.RawMessage(`{"role":"assistant","content":"[sessions_history omitted: message too large]","__openclaw":{"seq":3}}`),
		json.RawMessage(`{"n":12345678901234567890,"f":1e3}`),
	}
	for _, h := range []historyResult{
		{SessionKey: "main"},
		{SessionKey: "agent:main:<x>&\u2028\u2029\"\\é", Messages: []json.RawMessage{}, Bytes: 2},
		{SessionKey: "k", Messages: msgs, Truncated: true, DroppedMessages: true, ContentTruncated: true, ContentRedacted: true, Bytes: 1234},
		{SessionKey: "k", Messages: msgs[:1], Offset: &one, HasMore: &no, TotalMessages: &two},
		{SessionKey: "k", Messages: msgs[1:], Offset: &one, NextOffset: &two, HasMore: &yes, TotalMessages: &two},
	} {
		want, err := json.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.encode()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("encode = %s, %v\n json.Marshal = %s", got, err, want)
		}
	}
}

func TestViewCacheHitsAndMisses(t *testing.T) {
	all := variedTranscript()
	d := testDeps(t, historyCacheMaxBytes)
	d.viewsOf(all, false, false)
	if st := d.HistoryCacheStats(); st.Misses != uint64(len(all)) || st.Hits != 0 || st.Entries != len(all) {
		t.Fatalf("first call: %+v, want %d misses", st, len(all))
	}
	// includeTools is applied per call: the same views serve it
	d.viewsOf(all, true, false)
	if st := d.HistoryCacheStats(); st.Hits != uint64(len(all)) || st.Misses != uint64(len(all)) {
		t.Fatalf("includeTools call: %+v, want every entry a hit", st)
	}
	// the seq-tagged views of a paginated read are other views
	d.viewsOf(all[:3], false, true)
	if st := d.HistoryCacheStats(); st.Misses != uint64(len(all)+3) || st.Entries != len(all)+3 {
		t.Fatalf("paged call: %+v, want 3 more misses and views", st)
	}
	if st := d.HistoryCacheStats(); st.Bytes <= 0 || st.Bytes > st.MaxBytes || st.Evictions != 0 {
		t.Fatalf("accounting: %+v", st)
	}
	d.ResetHistoryCache()
	if st := d.HistoryCacheStats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("after reset: %+v", st)
	}
	d.viewsOf(all[:1], false, false)
	if st := d.HistoryCacheStats(); st.Misses != uint64(len(all)+4) {
		t.Fatalf("after reset: %+v, want a miss", st)
	}
}

// plainEntries are n small user messages at stream sequences 1..n.
func plainEntries(n int) []transcripts.Entry {
	out := make([]transcripts.Entry, n)
	for i := range out {
		out[i] = transcripts.Entry{N: uint64(i), Seq: uint64(i + 1), Data: fmt.Appendf(nil, `{"role":"user","content":"message %03d"}`, i)}
	}
	return out
}

func TestViewCacheStaysWithinItsBound(t *testing.T) {
	all := plainEntries(40)
	one := len(`{"content":"message 000","role":"user"}`) + viewNodeOverhead
	d := testDeps(t, 10*one) // room for ten views
	for i := range all {
		d.viewsOf(all[i:i+1], false, false)
		if st := d.HistoryCacheStats(); st.Bytes > st.MaxBytes {
			t.Fatalf("after %d entries: %d bytes over the bound %d", i+1, st.Bytes, st.MaxBytes)
		}
		if i == 5 {
			d.viewsOf(all[:1], false, false) // entry 0 is now recently used
		}
	}
	st := d.HistoryCacheStats()
	if st.Entries != 10 || st.Evictions != 30 || st.Bytes != 10*one {
		t.Fatalf("%+v, want 10 views of %d bytes and 30 evictions", st, one)
	}
	// the newest are held, the oldest gone; entry 0, touched after entry 5,
	// went before entry 6
	before := st.Hits
	d.viewsOf(all[30:], false, false)
	if st := d.HistoryCacheStats(); st.Hits != before+10 {
		t.Fatalf("newest ten: %d hits, want 10", st.Hits-before)
	}
	before = d.HistoryCacheStats().Misses
	d.viewsOf(all[:1], false, false)
	if st := d.HistoryCacheStats(); st.Misses != before+1 {
		t.Fatal("entry 0 was not evicted")
	}
}

func TestViewCacheSkipsViewsOverAnEighthOfItsBound(t *testing.T) {
	big := transcripts.Entry{N: 0, Seq: 1, Data: fmt.Appendf(nil, `{"role":"user","content":%q}`, strings.Repeat("z", 3000))}
	d := testDeps(t, 8*1024)
	v := d.viewsOf([]transcripts.Entry{big}, false, false)
	if len(v) != 1 || len(v[0].raw) < 3000 {
		t.Fatalf("view: %v", v)
	}
	if st := d.HistoryCacheStats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("a 3 KB view in an 8 KiB cache was kept: %+v", st)
	}
}

func TestViewCacheRedactionChangeEmptiesIt(t *testing.T) {
	e := transcripts.Entry{N: 0, Seq: 1, Data: []byte(`{"role":"user","content":"the word is swordfish-0123456789abcdef"}`)}
	d := testDeps(t, historyCacheMaxBytes)
	plain := d.viewsOf([]transcripts.Entry{e}, false, false)
	if !bytes.Contains(plain[0].raw, []byte("swordfish-0123456789abcdef")) || plain[0].redacted {
		t.Fatalf("default redactor changed it: %s", plain[0].raw)
	}
	red, err := sanitize.NewRedactor("", []string{`swordfish-[0-9a-f]+`})
	if err != nil {
		t.Fatal(err)
	}
	d.Redactor = red
	masked := d.viewsOf([]transcripts.Entry{e}, false, false)
	if bytes.Contains(masked[0].raw, []byte("swordfish-0123456789abcdef")) || !masked[0].redacted {
		t.Fatalf("the cached view survived a redaction change: %s", masked[0].raw)
	}
	if st := d.HistoryCacheStats(); st.Misses != 2 || st.Hits != 0 || st.Entries != 1 {
		t.Fatalf("%+v, want two misses and one view", st)
	}
	// the same config in a new redactor keeps the views
	same, err := sanitize.NewRedactor("", []string{`swordfish-[0-9a-f]+`})
	if err != nil {
		t.Fatal(err)
	}
	d.Redactor = same
	d.viewsOf([]transcripts.Entry{e}, false, false)
	if st := d.HistoryCacheStats(); st.Hits != 1 {
		t.Fatalf("%+v, want a hit under an equal config", st)
	}
}

// A view is used only for the very entry it was made from: a sequence that
// now holds other bytes or another entry number (a stream deleted and
// recreated starts its sequences again) is a miss.
func TestViewCacheChecksTheEntry(t *testing.T) {
	d := testDeps(t, historyCacheMaxBytes)
	first := transcripts.Entry{N: 0, Seq: 1, Data: []byte(`{"role":"user","content":"first"}`)}
	d.viewsOf([]transcripts.Entry{first}, false, true)
	for _, e := range []transcripts.Entry{
		{N: 0, Seq: 1, Data: []byte(`{"role":"user","content":"other"}`)},
		{N: 0, Seq: 1, Data: []byte(`{"role":"user","content":"other!"}`)},
		{N: 4, Seq: 1, Data: first.Data},
	} {
		want := d.sanitizeEntries([]transcripts.Entry{e}, false, true)
		got := d.viewsOf([]transcripts.Entry{e}, false, true)
		if len(got) != 1 || !bytes.Equal(got[0].raw, want[0].raw) || got[0].seq != want[0].seq {
			t.Fatalf("entry %d %s: got %s, want %s", e.N, e.Data, got[0].raw, want[0].raw)
		}
	}
	if st := d.HistoryCacheStats(); st.Hits != 0 || st.Misses != 4 {
		t.Fatalf("%+v, want every call a miss", st)
	}
}

func TestViewCacheConcurrentCalls(t *testing.T) {
	all := append(variedTranscript(), plainEntries(60)...)
	for i := range all {
		all[i].N, all[i].Seq = uint64(i), uint64(i+1)
	}
	ref := testDeps(t, historyCacheMaxBytes)
	d := testDeps(t, 16*1024) // small enough to evict while the calls run
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				w := all[(g*7+i)%40 : (g*7+i)%40+25]
				paged := i%2 == 0
				got := d.viewsOf(w, g%2 == 0, paged)
				want := ref.sanitizeEntries(w, g%2 == 0, paged)
				if len(got) != len(want) {
					errs <- fmt.Errorf("goroutine %d call %d: %d views, want %d", g, i, len(got), len(want))
					return
				}
				for k := range got {
					if !bytes.Equal(got[k].raw, want[k].raw) {
						errs <- fmt.Errorf("goroutine %d call %d view %d: %s, want %s", g, i, k, got[k].raw, want[k].raw)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := d.HistoryCacheStats(); st.Bytes > st.MaxBytes || st.Hits == 0 || st.Evictions == 0 {
		t.Fatalf("%+v, want hits, evictions and the bound held", st)
	}
}

// viewsOf is historyViews for fetched entries in stream generation 0.
func (d *Deps) viewsOf(entries []transcripts.Entry, includeTools, withSeq bool) []viewMessage {
	v, ok := d.historyViews(entries, 0, includeTools, withSeq)
	if !ok {
		panic("a fetched entry cannot miss its view")
	}
	return v
}

// An entry the read did not fetch (no Data) is served from its view; when
// that view is gone (evicted after the read trusted it), historyViews says
// so and the page must be read again; a view of another stream generation
// never serves.
func TestViewCacheUnfetchedEntries(t *testing.T) {
	all := variedTranscript()
	d := testDeps(t, historyCacheMaxBytes)
	want := d.viewsOf(all, true, false)
	bare := make([]transcripts.Entry, len(all))
	for i, e := range all {
		bare[i] = transcripts.Entry{N: e.N, Seq: e.Seq}
	}
	got, ok := d.historyViews(bare, 0, true, false)
	if !ok || len(got) != len(want) {
		t.Fatalf("unfetched entries with views: ok=%v, %d messages, want %d", ok, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].raw, want[i].raw) {
			t.Fatalf("message %d: %s, want %s", i, got[i].raw, want[i].raw)
		}
	}
	if _, ok := d.historyViews(bare, 1, true, false); ok {
		t.Fatal("a view of generation 0 served generation 1")
	}
	d.ResetHistoryCache()
	if _, ok := d.historyViews(bare, 0, true, false); ok {
		t.Fatal("an unfetched entry without a view was served")
	}
}
