package sessions

import "hash/maphash"

// parentFilter is a one-hash Bloom filter of the keys the index holds
// children for: a list page looks up the children of each of its rows,
// most have none, and a probe of this 16 KiB bitmap stays in cache where a
// miss in a map of every parent key (100k sessions) did not.
// Bits are only set, so a parent whose last child left stays a false
// positive (one map lookup) until the filter is rebuilt from the map, once
// it has taken in more parents than twice those there are now.
type parentFilter struct {
	seed  maphash.Seed
	bits  []uint64
	added int // parents added since the last rebuild
}

const parentFilterBits = 1 << 17

func (f *parentFilter) reset() {
	f.seed = maphash.MakeSeed()
	f.bits = make([]uint64, parentFilterBits/64)
	f.added = 0
}

func (f *parentFilter) bit(key string) (word int, mask uint64) {
	h := maphash.String(f.seed, key) % parentFilterBits
	return int(h / 64), 1 << (h % 64)
}

// add files p, just given its first child; children is the index's map
// (mu held for writing).
func (f *parentFilter) add(p string, children map[string][]uint32) {
	if f.added++; f.added > 2*len(children)+1024 {
		clear(f.bits)
		f.added = 0
		for k := range children {
			f.set(k)
		}
		return // p is among them
	}
	f.set(p)
}

func (f *parentFilter) set(key string) {
	w, m := f.bit(key)
	f.bits[w] |= m
}

// mayHave is false only for a key with no children (mu held).
func (f *parentFilter) mayHave(key string) bool {
	w, m := f.bit(key)
	return f.bits[w]&m != 0
}
