package sessions

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// keyTable agrees with a map through random sets and removes, across
// growth and the backward shifts that removes make.
func TestKeyTableMatchesAMap(t *testing.T) {
	keys := make([]string, 3000)
	for i := range keys {
		keys[i] = fmt.Sprintf("agent:main:k%d", i)
	}
	var byslot []string // slot -> key, as the index's entries hold them
	tab := keyTable{keyOf: func(s uint32) string { return byslot[s] }}
	want := map[string]uint32{}
	r := rand.New(rand.NewPCG(1, 2))
	for step := range 40000 {
		k := keys[r.IntN(len(keys))]
		if _, ok := want[k]; ok && r.IntN(3) == 0 {
			tab.remove(k)
			delete(want, k)
		} else {
			byslot = append(byslot, k)
			slot := uint32(len(byslot) - 1)
			tab.set(k, slot)
			want[k] = slot
		}
		if step%997 == 0 || step == 39999 {
			if tab.len() != len(want) {
				t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(want))
			}
			for _, k := range keys {
				got, ok := tab.get(k)
				w, wok := want[k]
				if ok != wok || got != w {
					t.Fatalf("step %d: get(%s) = %d %v, want %d %v", step, k, got, ok, w, wok)
				}
			}
		}
	}
}
