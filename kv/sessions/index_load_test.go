package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

func newTestIndex() *Index {
	return bareIndex(slog.New(slog.DiscardHandler), func(e *Entry) *Derived {
		return &Derived{Names: &DerivedNames{AgentID: e.AgentID, Channel: e.Channel}}
	})
}

// dump is everything a reader of ix can see, keys in place of slots.
func dump(ix *Index) string {
	keys := func(slots []uint32) []string {
		out := make([]string, len(slots))
		for i, s := range slots {
			out[i] = ix.slots[s].Key
		}
		return out
	}
	var order []uint32
	ix.order.Ascend(func(s uint32) bool { order = append(order, s); return true })
	maps := func(m map[string][]uint32) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		out := ""
		for _, k := range ks {
			out += fmt.Sprintf("%s=%v;", k, keys(m[k]))
		}
		return out
	}
	var ids []string
	for _, e := range ix.slots {
		if e == nil {
			continue
		}
		s, ok := ix.bySessionID.get(e.SessionID)
		if ok {
			ids = append(ids, e.SessionID+">"+ix.slots[s].Key)
		}
		if d := e.Derived; d == nil || d.Names.AgentID != e.AgentID || d.Names.Channel != e.Channel {
			ids = append(ids, "bad derive "+e.Key)
		}
		if got, _ := ix.byKey.get(e.Key); ix.slots[got] != e {
			ids = append(ids, "byKey "+e.Key)
		}
		found := false
		ix.EachSearch(SearchNeedle(e.Key[len(e.Key)-6:]), func(m *Entry) bool { found = found || m == e; return true })
		if !found {
			ids = append(ids, "search "+e.Key)
		}
	}
	slices.Sort(ids)
	return fmt.Sprintf("order %v\nchildren %s\nlabels %s\nshared %s\nids %v\nkeys %d applied %d",
		keys(order), maps(ix.children), maps(ix.byLabel), maps(ix.sharedIDs), ids, ix.byKey.len(), ix.applied)
}

// TestIndexLoadMatchesApply: the initial load (decoded on several
// goroutines, filed in batches, the order tree built at the end) leaves the
// index a reader sees exactly as applying the same changes one by one.
func TestIndexLoadMatchesApply(t *testing.T) {
	var kes []jetstream.KeyValueEntry
	rev := uint64(0)
	put := func(e *Entry) {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		rev++
		// the first value's count of those that follow is a hint: here
		// one too low, so the load both reserves and grows
		kes = append(kes, opKE{fakeKE{key: bus.EncodeKey(e.Key), val: b, rev: rev, delta: uint64(loadBatch)}, jetstream.KeyValuePut})
	}
	n := 3*loadBatch + 17
	for i := range n {
		e := Sample(i, 1_790_000_000_000)
		if i%13 == 0 {
			e.Label = fmt.Sprintf("label %d", i%3)
		}
		if i%29 == 0 {
			e.SessionID = "shared-id"
		}
		if i%31 == 0 {
			e.UpdatedAt = 1_789_000_000_000 // ties: ordered by key
		}
		put(e)
	}
	for i := 0; i < n; i += 7 { // updated again
		e := Sample(i, 1_790_000_000_000)
		e.UpdatedAt += 5
		e.Label = "again"
		put(e)
	}
	for i := 3; i < n; i += 11 { // deleted
		rev++
		kes = append(kes, opKE{fakeKE{key: bus.EncodeKey(Sample(i, 0).Key), rev: rev}, jetstream.KeyValueDelete})
	}
	rev++
	kes = append(kes, opKE{fakeKE{key: bus.EncodeKey(Sample(5, 0).Key), val: []byte("{corrupt"), rev: rev}, jetstream.KeyValuePut})
	kes = append(kes, opKE{fakeKE{key: "not base64 !", val: []byte("{}"), rev: rev + 1}, jetstream.KeyValuePut})

	one := newTestIndex()
	for _, ke := range kes {
		one.apply(ke)
	}
	loaded := newTestIndex()
	updates := make(chan jetstream.KeyValueEntry, len(kes)+1)
	for _, ke := range kes {
		updates <- ke
	}
	updates <- nil
	if !loaded.load(context.Background(), updates) {
		t.Fatal("load ended before the end-of-initial-values marker")
	}
	want, got := dump(one), dump(loaded)
	if got != want {
		t.Errorf("loaded index differs from the one applied one by one:\n got %.2000s\nwant %.2000s", got, want)
	}
}
