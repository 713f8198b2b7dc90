package sessions

import (
	"testing"
)

// benchEntries are Sample's inventory with every tenth entry carrying rare
// fields (a sub-agent's role, an override, an import mark), as a busy store
// holds them.
func benchEntries() []*Entry {
	es := make([]*Entry, 1000)
	for i := range es {
		es[i] = Sample(i, 1_790_000_000_000)
		if i%10 == 9 {
			es[i].SetRare(func(r *RareFields) {
				r.SubagentRole, r.SubagentControlScope, r.ThinkingLevel = "leaf", "none", "high"
				r.StateVersion = uint64(i)
				r.Imports = []ImportMark{{ID: "f", At: 3, N: 2, Done: true}}
			})
		}
	}
	return es
}

// BenchmarkEntryEncode is the store's encode of an entry: every write.
func BenchmarkEntryEncode(b *testing.B) {
	es := benchEntries()
	i := 0
	for b.Loop() {
		if _, err := es[i%len(es)].encode(); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkEntryDecode is the decode of a stored entry: every read and
// every change the index's watch applies (record.Bucket.Decode calls
// UnmarshalJSON on a new entry).
func BenchmarkEntryDecode(b *testing.B) { benchDecode(b, (*Entry).UnmarshalJSON) }

// BenchmarkEntryDecodeFull is the same decode by the full decoder alone,
// what every decode cost before the plain path.
func BenchmarkEntryDecodeFull(b *testing.B) { benchDecode(b, (*Entry).decodeFull) }

func benchDecode(b *testing.B, decode func(*Entry, []byte) error) {
	es := benchEntries()
	data := make([][]byte, len(es))
	for i, e := range es {
		data[i], _ = e.encode()
	}
	i := 0
	for b.Loop() {
		e := new(Entry)
		if err := decode(e, data[i%len(data)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
