package sessions

import (
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// bareIndex is an Index with no bucket behind it: tests and benchmarks
// apply entries to it by hand. derive may be nil.
func bareIndex(log *slog.Logger, derive Derive) *Index {
	ix := &Index{store: &Store{b: record.New[Entry](nil, nil, "session")}, log: log}
	ix.changed = sync.NewCond(&ix.mu)
	ix.derive = derive
	ix.clear()
	return ix
}

// sampleKEs is n entries shaped like `sessionbus bench`'s (Sample), encoded
// as the watch delivers them, at revisions 1 to n.
func sampleKEs(n int) []fakeKE {
	kes := make([]fakeKE, n)
	for i := range n {
		e := Sample(i, 1_790_000_000_000)
		v, _ := json.Marshal(e)
		kes[i] = fakeKE{bus.EncodeKey(e.Key), v, uint64(i + 1), uint64(n - 1 - i)}
	}
	return kes
}
