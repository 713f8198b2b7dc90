package sessions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"
)

// An entry's JSON is the stored form with every field flat, whether the
// field lives in Entry or in Rare: decoding and encoding again gives the
// same bytes, for random subsets of the fields set.
func TestEntryJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		var w entryJSON
		v := reflect.ValueOf(&w).Elem()
		for f := range v.NumField() {
			if rng.IntN(3) > 0 {
				continue
			}
			switch fv := v.Field(f); fv.Kind() {
			case reflect.String:
				fv.SetString(fmt.Sprintf("v%d<&>ü", rng.IntN(100)))
			case reflect.Int64:
				fv.SetInt(rng.Int64N(1 << 40))
			case reflect.Uint64:
				fv.SetUint(rng.Uint64N(1 << 40))
			case reflect.Bool:
				fv.SetBool(true)
			case reflect.Pointer:
				switch fv.Interface().(type) {
				case *int:
					n := rng.IntN(5)
					fv.Set(reflect.ValueOf(&n))
				case *Origin:
					fv.Set(reflect.ValueOf(&Origin{Provider: "telegram", ThreadID: "t"}))
				case *DeliveryContext:
					fv.Set(reflect.ValueOf(&DeliveryContext{Channel: "slack", To: "u1"}))
				case *int64:
					n := rng.Int64N(5000)
					fv.Set(reflect.ValueOf(&n))
				}
			case reflect.Slice:
				switch fv.Interface().(type) {
				case []ImportMark:
					fv.Set(reflect.ValueOf([]ImportMark{{ID: "x", At: 3, N: 2, Done: true}}))
				case []WaitingRun:
					fv.Set(reflect.ValueOf([]WaitingRun{{Run: "r1", Seq: 7}}))
				}
			}
		}
		want, err := json.Marshal(&w)
		if err != nil {
			t.Fatal(err)
		}
		var e Entry
		if err := json.Unmarshal(want, &e); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d:\n got %s\nwant %s", i, got, want)
		}
		if byValue, _ := json.Marshal(e); !bytes.Equal(byValue, want) {
			t.Fatalf("round %d by value: %s", i, byValue)
		}
	}
}

// Decoding over an entry keeps the fields the JSON does not name, matches
// names case-insensitively as encoding/json does, and never writes through
// a Rare shared with another entry.
func TestEntryJSONDecodeOver(t *testing.T) {
	a := &Entry{Key: "k", Label: "l"}
	a.SetRare(func(r *RareFields) { r.ThinkingLevel = "high"; r.StateVersion = 3 })
	b := *a // shares Rare
	if err := json.Unmarshal([]byte(`{"THINKINGLEVEL":"low","label":"m"}`), &b); err != nil {
		t.Fatal(err)
	}
	if b.Key != "k" || b.Label != "m" || b.Rares().ThinkingLevel != "low" || b.Rares().StateVersion != 3 {
		t.Fatalf("decoded over: %+v %+v", b, b.Rares())
	}
	if a.Rares().ThinkingLevel != "high" {
		t.Fatal("decoding wrote through a shared Rare")
	}
	var c Entry
	if err := json.Unmarshal([]byte(`{"key":"x"}`), &c); err != nil || c.Rare != nil {
		t.Fatalf("an entry without rare fields has Rare %+v (%v)", c.Rare, err)
	}
}

// Every indexed session holds one Entry: it stays in the 384-byte
// allocation class (a field added to it costs a million sessions 32 MB;
// a field few sessions set belongs in RareFields).
func TestEntryFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); n > 384 {
		t.Fatalf("Entry is %d bytes, want at most 384", n)
	}
}
