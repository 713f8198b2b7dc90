package sessions

import (
	"math/bits"
	"slices"
	"sync"
)

// postings maps each trigram to the slots of the sessions whose searched
// text has it. A needle's candidates are the intersection of its
// trigrams' lists, taken smallest first, so a selective search costs about
// its rarest trigram's list and its matches, not the whole index.
//
// A list is a sorted []uint32 of slots while it is sparse and a bitmap
// over slots once it holds more than one slot in denseShare: the trigrams
// every key has ("age", "nt:", ...) would otherwise cost 4 bytes per
// session each, where a bitmap costs 1/8 byte per slot, and the
// intersection tests a candidate against a bitmap in one step.
type postings struct {
	lists map[trigram]*posting
}

type posting struct {
	ids  []uint32 // sorted slots; nil while dense
	bits []uint64 // bitmap by slot while dense, covering the slots set so far
	n    int      // slots held
}

// A list turns dense above denseMin slots and 1/denseShare of the slots,
// and sparse again below half of both, so a list near the line does not
// flip on every change. Variables: tests lower denseMin to reach bitmaps
// with a few hundred sessions.
var denseMin = 1024

const denseShare = 32

// denseAt reports whether a list of n slots, in an index of nslots, is
// past the line to turn dense.
func denseAt(n, nslots int) bool { return n > denseMin && n > nslots/denseShare }

func (x *postings) reset() { x.lists = make(map[trigram]*posting) }

// add files slot under each of grams; nslots is the index's slot count.
func (x *postings) add(slot uint32, grams []trigram, nslots int) {
	for _, g := range grams {
		p := x.lists[g]
		if p == nil {
			p = &posting{}
			x.lists[g] = p
		}
		p.add(slot)
		if p.bits == nil && denseAt(p.n, nslots) {
			p.toDense()
		}
	}
}

// remove takes slot out of each of grams' lists.
func (x *postings) remove(slot uint32, grams []trigram, nslots int) {
	for _, g := range grams {
		p := x.lists[g]
		if p == nil {
			continue
		}
		p.remove(slot)
		switch {
		case p.n == 0:
			delete(x.lists, g)
		case p.bits != nil && (p.n < denseMin/2 || p.n < nslots/denseShare/2):
			p.toSparse()
		}
	}
}

// update moves slot from the trigrams only old has to those only new has
// (both sorted sets).
func (x *postings) update(slot uint32, old, new []trigram, nslots int) {
	var gone, added []trigram
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		switch {
		case j == len(new) || i < len(old) && old[i] < new[j]:
			gone = append(gone, old[i])
			i++
		case i == len(old) || new[j] < old[i]:
			added = append(added, new[j])
			j++
		default:
			i++
			j++
		}
	}
	x.remove(slot, gone, nslots)
	x.add(slot, added, nslots)
}

func (p *posting) add(slot uint32) {
	if p.bits != nil {
		w := int(slot >> 6)
		if w >= len(p.bits) {
			p.bits = append(p.bits, make([]uint64, w+1-len(p.bits))...)
		}
		if p.bits[w]&(1<<(slot&63)) == 0 {
			p.bits[w] |= 1 << (slot & 63)
			p.n++
		}
		return
	}
	// slots are mostly new ones, numbered past every other
	if n := len(p.ids); n == 0 || p.ids[n-1] < slot {
		p.ids = append(p.ids, slot)
		p.n++
		return
	}
	if at, found := slices.BinarySearch(p.ids, slot); !found {
		p.ids = slices.Insert(p.ids, at, slot)
		p.n++
	}
}

func (p *posting) remove(slot uint32) {
	if p.bits != nil {
		if p.has(slot) {
			p.bits[slot>>6] &^= 1 << (slot & 63)
			p.n--
		}
		return
	}
	if at, found := slices.BinarySearch(p.ids, slot); found {
		p.ids = slices.Delete(p.ids, at, at+1)
		p.n--
	}
}

// has reports whether a dense list holds slot.
func (p *posting) has(slot uint32) bool {
	w := int(slot >> 6)
	return w < len(p.bits) && p.bits[w]&(1<<(slot&63)) != 0
}

func (p *posting) toDense() {
	p.bits = make([]uint64, p.ids[len(p.ids)-1]/64+1)
	for _, s := range p.ids {
		p.bits[s>>6] |= 1 << (s & 63)
	}
	p.ids = nil
}

func (p *posting) toSparse() {
	p.ids = make([]uint32, 0, p.n)
	for w, word := range p.bits {
		for word != 0 {
			p.ids = append(p.ids, uint32(w*64+bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
	p.bits = nil
}

// candidates intersects grams' lists, smallest first. It returns the
// sorted slots that hold every trigram, or, when every list is dense (a
// needle of common trigrams only, which no short list narrows), ok false
// and the dense lists, for the caller to test slots against as it walks.
func (x *postings) candidates(grams []trigram) (slots []uint32, dense []*posting, ok bool) {
	ps := make([]*posting, 0, len(grams))
	for _, g := range grams {
		p := x.lists[g]
		if p == nil {
			return nil, nil, true // a trigram no session has
		}
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *posting) int { return a.n - b.n })
	if ps[0].bits != nil {
		return nil, ps, false
	}
	rest := ps[1:]
	if len(rest) > 0 && rest[0].bits == nil && len(ps[0].ids) >= probeMin && len(rest[0].ids) < 16*len(ps[0].ids) {
		slots, rest = probeIntersect(ps[0].ids, rest[0].ids), rest[1:]
	} else {
		slots = slices.Clone(ps[0].ids)
	}
	for _, p := range rest {
		if len(slots) == 0 {
			break
		}
		if p.bits != nil {
			slots = slices.DeleteFunc(slots, func(s uint32) bool { return !p.has(s) })
		} else {
			slots = intersectInto(slots, p.ids)
		}
	}
	return slots, nil, true
}

// probeMin is the shortest list probeIntersect takes: below it a merge
// costs about as little and needs no scratch bitmap. A variable: the
// whole-index test lowers it to take both ways.
var probeMin = 512

// scratchBits holds zeroed bitmaps for probeIntersect, one per concurrent
// search (EachSearch runs under the read lock, so searches overlap).
var scratchBits sync.Pool

// probeIntersect returns the slots of b (sorted) that a (sorted) has, for
// two long lists of a size. A merge's steps each wait on the compare before
// (a list from a million sessions' hex ids, ~6,500 slots against ~6,800,
// took 51 µs); marking a's slots in a bitmap and testing b's against it
// are independent steps (9.7 µs). The bitmap is cleared again by a's slots,
// not by its length, and kept for the next search.
func probeIntersect(a, b []uint32) []uint32 {
	words := int(a[len(a)-1]>>6) + 1
	var bm []uint64
	if p, _ := scratchBits.Get().(*[]uint64); p != nil && len(*p) >= words {
		bm = *p
	} else {
		bm = make([]uint64, words)
	}
	for _, s := range a {
		bm[s>>6] |= 1 << (s & 63)
	}
	var out []uint32
	for _, s := range b {
		if w := int(s >> 6); w < len(bm) && bm[w]&(1<<(s&63)) != 0 {
			out = append(out, s)
		}
	}
	for _, s := range a {
		bm[s>>6] = 0
	}
	scratchBits.Put(&bm)
	return out
}

// intersectInto keeps the slots of a (sorted, the shorter) that b (sorted)
// has: a merge when the lists are of a size, else a gallop through b, whose
// cost is about len(a)·log(len(b)/len(a)), not len(b).
func intersectInto(a, b []uint32) []uint32 {
	out := a[:0]
	if len(b) < 16*len(a) {
		i, j := 0, 0
		for i < len(a) && j < len(b) {
			x, y := a[i], b[j]
			if x == y {
				out = append(out, x)
			}
			if x <= y {
				i++
			}
			if y <= x {
				j++
			}
		}
		return out
	}
	j := 0
	for _, s := range a {
		// gallop to a step past s, then binary search the last step
		step := 1
		for j+step < len(b) && b[j+step] < s {
			j += step
			step <<= 1
		}
		k, found := slices.BinarySearch(b[j:min(j+step+1, len(b))], s)
		j += k
		if found {
			out = append(out, s)
		}
		if j >= len(b) {
			break
		}
	}
	return out
}

// holdsAll reports whether slot is in every one of the dense lists ps.
func holdsAll(ps []*posting, slot uint32) bool {
	for _, p := range ps {
		if !p.has(slot) {
			return false
		}
	}
	return true
}
