package sessions

import "hash/maphash"

// keyTable maps a string to a slot without storing the string: it is an
// open-addressing hash table of slot numbers, and the string of a slot is
// read back from the entry in it (keyOf). A Go map[string]uint32 keeps a
// 16-byte string header per session beside its slot, about 45 bytes with
// its growth slack, and every header is a pointer the garbage collector
// scans on each cycle; this table holds 4-byte slots (5-11 bytes a session
// at its load factor) and no pointers, so at a million sessions it spares
// ~70 MB of heap and millions of pointers per cycle for the two lookups
// that use it (by key, by sessionId).
type keyTable struct {
	cells []uint32 // slot+1; 0 is empty
	n     int
	keyOf func(slot uint32) string
}

var keySeed = maphash.MakeSeed()

// find returns the cell of key, or of the empty cell where it would go.
func (t *keyTable) find(key string) (cell int, found bool) {
	if len(t.cells) == 0 {
		return -1, false
	}
	mask := len(t.cells) - 1
	for i := int(maphash.String(keySeed, key)) & mask; ; i = (i + 1) & mask {
		c := t.cells[i]
		if c == 0 {
			return i, false
		}
		if t.keyOf(c-1) == key {
			return i, true
		}
	}
}

// get returns the slot of key.
func (t *keyTable) get(key string) (uint32, bool) {
	i, ok := t.find(key)
	if !ok {
		return 0, false
	}
	return t.cells[i] - 1, true
}

// set files slot under key (keyOf(slot) must be key), replacing the slot
// key had.
func (t *keyTable) set(key string, slot uint32) {
	if (t.n+1)*4 > len(t.cells)*3 { // load factor at most 3/4
		t.grow()
	}
	i, ok := t.find(key)
	if !ok {
		t.n++
	}
	t.cells[i] = slot + 1
}

// add files slot under key, which the table does not hold, in cell, the
// empty cell find returned for key (keyOf(slot) must be key): one probe
// sequence for a lookup and an insert.
func (t *keyTable) add(cell int, key string, slot uint32) {
	if cell < 0 || (t.n+1)*4 > len(t.cells)*3 {
		t.grow()
		cell, _ = t.find(key)
	}
	t.cells[cell] = slot + 1
	t.n++
}

// reserve makes room for n keys in all, so adding them never grows the
// table (each growth rehashes every key, reading it from its entry).
func (t *keyTable) reserve(n int) {
	size := max(16, len(t.cells))
	for size*3 < n*4 {
		size *= 2
	}
	if size > len(t.cells) {
		t.resize(size)
	}
}

// remove drops key, shifting back the cells after it (no tombstones: a
// table that sees many deletes stays as fast as a fresh one).
func (t *keyTable) remove(key string) {
	i, ok := t.find(key)
	if !ok {
		return
	}
	mask := len(t.cells) - 1
	t.cells[i] = 0
	t.n--
	for j := (i + 1) & mask; t.cells[j] != 0; j = (j + 1) & mask {
		home := int(maphash.String(keySeed, t.keyOf(t.cells[j]-1))) & mask
		// the cell at j may move to the hole at i if its home is not in (i, j]
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.cells[i], t.cells[j] = t.cells[j], 0
			i = j
		}
	}
}

func (t *keyTable) grow() { t.resize(max(16, 2*len(t.cells))) }

// resize rehashes the table into size cells, a power of two.
func (t *keyTable) resize(size int) {
	old := t.cells
	t.cells = make([]uint32, size)
	mask := len(t.cells) - 1
	for _, c := range old {
		if c == 0 {
			continue
		}
		i := int(maphash.String(keySeed, t.keyOf(c-1))) & mask
		for t.cells[i] != 0 {
			i = (i + 1) & mask
		}
		t.cells[i] = c
	}
}

// len is the number of keys.
func (t *keyTable) len() int { return t.n }
