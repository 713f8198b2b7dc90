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

// opKE is fakeKE with a chosen operation, for deletes.
type opKE struct {
	fakeKE
	op jetstream.KeyValueOp
}

func (o opKE) Operation() jetstream.KeyValueOp { return o.op }

// Children are kept ordered by key, and the parent filter only skips lookups: through puts, lineage changes and
// deletes (and the filter's rebuilds), AppendChildren finds exactly the
// children Children does, and a key that never had children is mostly
// answered by the filter alone.
func TestAppendChildrenMatchesChildrenThroughChurn(t *testing.T) {
	ix := bareIndex(slog.New(slog.DiscardHandler), nil)
	rng := rand.New(rand.NewPCG(17, 1))
	key := func(i int) string { return fmt.Sprintf("agent:main:k%d", i) }
	const pool = 300
	rev := uint64(0)
	rebuilds, lastAdded := 0, 0
	for op := range 30000 {
		k := key(rng.IntN(pool))
		rev++
		ke := opKE{fakeKE{key: bus.EncodeKey(k), rev: rev}, jetstream.KeyValuePut}
		if rng.IntN(3) == 0 {
			ke.op = jetstream.KeyValueDelete
		} else {
			e := &Entry{Key: k}
			switch rng.IntN(4) {
			case 0:
				e.SpawnedBy = key(rng.IntN(pool))
			case 1:
				e.ParentSessionKey = key(rng.IntN(pool))
			case 2:
				e.SpawnedBy, e.ParentSessionKey = key(rng.IntN(pool)), key(rng.IntN(pool))
			}
			ke.val, _ = json.Marshal(e)
		}
		ix.apply(ke)
		if ix.parentsF.added < lastAdded {
			rebuilds++
		}
		lastAdded = ix.parentsF.added
		if op%97 != 0 {
			continue
		}
		for i := range pool {
			p := key(i)
			want, got := ix.Children(p), ix.AppendChildren(nil, p)
			if !slices.Equal(want, got) {
				t.Fatalf("op %d: children of %s: AppendChildren %d, Children %d", op, p, len(got), len(want))
			}
			if !slices.IsSortedFunc(want, func(a, b *Entry) int { return strings.Compare(a.Key, b.Key) }) {
				t.Fatalf("op %d: children of %s not ordered by key", op, p)
			}
		}
	}
	if rebuilds == 0 {
		t.Fatal("the filter was never rebuilt: the churn did not reach the rebuild")
	}
	positives := 0
	for i := range 10000 {
		if ix.parentsF.mayHave(fmt.Sprintf("agent:main:none%d", i)) {
			positives++
		}
	}
	if positives > 500 { // at most ~300 parents in 131072 bits: ~0.2%
		t.Fatalf("%d of 10000 childless keys pass the filter", positives)
	}
}
