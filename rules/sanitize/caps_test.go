package sanitize

import (
	"encoding/json"
	"strings"
	"testing"
)

func raws(items ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	return out
}

func TestCapByJSONBytes(t *testing.T) {
	msg := func(n int, seq int) string {
		return `{"role":"user","content":"` + strings.Repeat("x", n) + `","__openclaw":{"seq":` + itoa(seq) + `}}`
	}
	// Empty array.
	kept, dropped, hard, b := CapByJSONBytes(nil, HistoryMaxBytes)
	if len(kept) != 0 || dropped || hard || b != 2 {
		t.Fatalf("empty: %v %v %v %d", kept, dropped, hard, b)
	}
	// Fits.
	items := raws(`{"a":1}`, `{"b":2}`)
	kept, dropped, hard, b = CapByJSONBytes(items, HistoryMaxBytes)
	if len(kept) != 2 || dropped || hard || b != 2+7+7+1 {
		t.Fatalf("fits: %d %v %v %d", len(kept), dropped, hard, b)
	}
	// Drops oldest until it fits: three 40000-byte messages under 81920.
	items = raws(msg(40000, 1), msg(40000, 2), msg(40000, 3))
	kept, dropped, hard, b = CapByJSONBytes(items, HistoryMaxBytes)
	if len(kept) != 2 || !dropped || hard || string(kept[0]) != msg(40000, 2) {
		t.Fatalf("drop oldest: %d %v %v", len(kept), dropped, hard)
	}
	if want := 2 + len(kept[0]) + len(kept[1]) + 1; b != want || b > HistoryMaxBytes {
		t.Fatalf("bytes %d want %d", b, want)
	}
	// Exactly at the cap is kept.
	one := msg(0, 1)
	exact := msg(HistoryMaxBytes-2-len(one), 1)
	kept, _, hard, b = CapByJSONBytes(raws(exact), HistoryMaxBytes)
	if hard || b != HistoryMaxBytes || len(kept) != 1 {
		t.Fatalf("exact: %v %d", hard, b)
	}
	// A single oversized message becomes the placeholder, keeping its seq.
	kept, dropped, hard, b = CapByJSONBytes(raws(msg(10, 1), msg(90000, 7)), HistoryMaxBytes)
	want := `{"role":"assistant","content":"[sessions_history omitted: message too large]","__openclaw":{"seq":7}}`
	if len(kept) != 1 || string(kept[0]) != want || !dropped || !hard || b != len(want)+2 {
		t.Fatalf("placeholder: %s %v %v %d", kept, dropped, hard, b)
	}
	// Without a usable seq there is no __openclaw.
	for _, meta := range []string{``, `,"__openclaw":{"seq":0}`, `,"__openclaw":{"seq":1.5}`, `,"__openclaw":{"seq":"3"}`, `,"__openclaw":[1]`} {
		big := `{"role":"user","content":"` + strings.Repeat("y", 90000) + `"` + meta + `}`
		kept, _, _, _ = CapByJSONBytes(raws(big), HistoryMaxBytes)
		if string(kept[0]) != `{"role":"assistant","content":"[sessions_history omitted: message too large]"}` {
			t.Fatalf("meta %q: %s", meta, kept[0])
		}
	}
	// 3.0 is a safe integer in JavaScript.
	kept, _, _, _ = CapByJSONBytes(raws(`{"c":"`+strings.Repeat("z", 90000)+`","__openclaw":{"seq":3.0}}`), HistoryMaxBytes)
	if !strings.Contains(string(kept[0]), `"seq":3}`) {
		t.Fatalf("seq 3.0: %s", kept[0])
	}
	// Dropping stops as soon as the rest fits; the hard cap's "keep the last
	// item if it fits alone" branch cannot then trigger.
	kept, dropped, hard, b = CapByJSONBytes(raws(`{"a":1}`, `{"b":2}`), 9)
	if len(kept) != 1 || string(kept[0]) != `{"b":2}` || !dropped || hard || b != 9 {
		t.Fatalf("tiny cap: %s %v %v %d", kept, dropped, hard, b)
	}
	if OmittedPlaceholder != "[sessions_history omitted: message too large]" || HistoryMaxBytes != 81920 {
		t.Fatal("literals")
	}
}

func TestMarshalCompact(t *testing.T) {
	raw, err := MarshalCompact(map[string]any{"s": "<a>&\u2028\u2029\\u2028", "n": json.Number("1.50")})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"n":1.50,"s":"<a>&` + "\u2028\u2029" + `\\u2028"}`; string(raw) != want {
		t.Fatalf("got %s want %s", raw, want)
	}
	c, err := CompactJSON([]byte("{ \"a\" : [ 1, 2 ] }\n"))
	if err != nil || string(c) != `{"a":[1,2]}` {
		t.Fatalf("compact: %s %v", c, err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
