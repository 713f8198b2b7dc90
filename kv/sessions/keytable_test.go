package sessions

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// keyTable agrees with a map through random sets and removes, across
// growth and the backward shifts that removes make (a small table wraps
// around its end often).
func TestKeyTableMatchesAMap(t *testing.T) {
	checkKeyTable(t, 3000, 40000)
	for n := 5; n <= 60; n++ { // small, dense tables: clusters run past the end
		checkKeyTable(t, n, 3000)
	}
}

func checkKeyTable(t *testing.T, n, steps int) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("agent:main:k%d", i)
	}
	var byslot []string // slot -> key, as the index's entries hold them
	tab := keyTable{keyOf: func(s uint32) string { return byslot[s] }}
	want := map[string]uint32{}
	r := rand.New(rand.NewPCG(1, 2))
	for step := range steps {
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
		if step%997 == 0 || step == steps-1 || n < 100 {
			if tab.len() != len(want) {
				t.Fatalf("%d keys, step %d: len %d, want %d", n, step, tab.len(), len(want))
			}
			for _, k := range keys {
				got, ok := tab.get(k)
				w, wok := want[k]
				if ok != wok || got != w {
					t.Fatalf("%d keys, step %d: get(%s) = %d %v, want %d %v", n, step, k, got, ok, w, wok)
				}
			}
		}
	}
}
