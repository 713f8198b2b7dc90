package sessions

import "sync"

// bulkMin is the fewest slots build files in bulk; below it adding slot by
// slot costs less than the bulk tables (~16 MiB per worker). A variable:
// tests lower it to build small indexes in bulk.
var bulkMin = 1 << 14

// build fills the empty lists with the trigrams of every entry in slots
// (nil: a free slot), as adding each slot in turn would; the initial load
// calls it once every entry is in. Adding ~70 trigrams per session one by
// one is a map lookup and a cache miss or two each, ten seconds at a
// million sessions under the index lock. Here each of workers counts the
// trigrams of its own run of slots, every list is allocated once at its
// final size, and the workers fill their parts of each list in place, so
// a list comes out sorted with no sort and no regrowth. Runs are whole
// bitmap words, so no two workers write one word.
func (x *postings) build(slots []*Entry, workers int) {
	nslots := len(slots)
	if nslots < bulkMin {
		for s, e := range slots {
			if e != nil {
				x.add(uint32(s), entryTrigrams(e), nslots)
			}
		}
		return
	}
	workers = max(1, min(workers, nslots/max(bulkMin, 1)))
	tabs := make([]*gramCounts, workers)
	eachRun(nslots, workers, func(w, lo, hi int) {
		t := &gramCounts{ascii: make([]gramCount, flatGrams), other: map[trigram]*gramCount{}}
		t.each(slots, lo, hi, func(_ uint32, _ trigram, c *gramCount) { c.n++ })
		tabs[w] = t
	})

	ascii := make([]*posting, flatGrams) // the lists of ASCII trigrams and digit quads, by asciiIndex
	cs := make([]*gramCount, workers)
	for i := range ascii {
		some := false
		for w, t := range tabs {
			cs[w] = &t.ascii[i]
			some = some || cs[w].n != 0
		}
		if some {
			ascii[i] = x.open(asciiTrigram(i), cs, nslots)
		}
	}
	for _, t := range tabs {
		for g := range t.other {
			if x.lists[g] != nil {
				continue // opened from an earlier run's table
			}
			for w, u := range tabs {
				cs[w] = u.other[g] // nil where u's run lacks g
			}
			x.open(g, cs, nslots)
		}
	}

	eachRun(nslots, workers, func(w, lo, hi int) {
		tabs[w].each(slots, lo, hi, func(s uint32, g trigram, c *gramCount) {
			var p *posting
			if i, ok := asciiIndex(g); ok {
				p = ascii[i]
			} else {
				p = x.lists[g] // only read while the workers run
			}
			if p.bits != nil {
				p.bits[s>>6] |= 1 << (s & 63)
				return
			}
			p.ids[c.n] = s
			c.n++
		})
	})
}

// open makes g's list, sized for the runs' counts cs (nil: none), and
// turns each count into its run's cursor: where the run's slots go in the
// list, after those of the runs before it.
func (x *postings) open(g trigram, cs []*gramCount, nslots int) *posting {
	n := uint32(0)
	for _, c := range cs {
		if c != nil {
			c.n, n = n, n+c.n
			c.last = 0 // the fill counts each entry's trigram once again
		}
	}
	p := &posting{n: int(n)}
	if denseAt(p.n, nslots) {
		p.bits = make([]uint64, (nslots+63)/64)
	} else {
		p.ids = make([]uint32, n)
	}
	x.lists[g] = p
	return p
}

// eachRun splits slots 0 to nslots into runs of whole bitmap words, one
// per worker, and runs fn on each at once.
func eachRun(nslots, workers int, fn func(w, lo, hi int)) {
	run := ((nslots+workers-1)/workers + 63) &^ 63
	var wg sync.WaitGroup
	for w := range workers {
		lo := min(w*run, nslots)
		wg.Go(func() { fn(w, lo, min(lo+run, nslots)) })
	}
	wg.Wait()
}

// gramCount is one run's count of a trigram's slots, then its cursor in
// the trigram's list.
type gramCount struct {
	n    uint32
	last uint32 // 1 + the slot that last counted: a repeat in one entry counts once
}

// gramCounts is one run's counts. Nearly every trigram is ASCII (the keys,
// ids and most names are), and those index a flat table, which is cheaper
// than a map per lookup; the rest go in a map.
type gramCounts struct {
	ascii []gramCount // by asciiIndex (ASCII trigrams and digit quads)
	other map[trigram]*gramCount
}

// flatGrams is the size of the flat tables: every trigram of three ASCII
// bytes (21 bits), then every digit quad.
const flatGrams = 1<<21 + 10_000

// asciiIndex packs a trigram of three ASCII bytes into 21 bits, and a
// digit quad past them.
func asciiIndex(g trigram) (int, bool) {
	if g>>24 == quadTag {
		return 1<<21 + int(g&0xffffff), true
	}
	if g&0xff808080 != 0 {
		return 0, false
	}
	return int(g>>16)<<14 | int(g>>8&0x7f)<<7 | int(g&0x7f), true
}

func asciiTrigram(i int) trigram {
	if i >= 1<<21 {
		return quadTag<<24 | trigram(i-1<<21)
	}
	return trigram(i>>14)<<16 | trigram(i>>7&0x7f)<<8 | trigram(i&0x7f)
}

func (t *gramCounts) at(g trigram) *gramCount {
	if i, ok := asciiIndex(g); ok {
		return &t.ascii[i]
	}
	c := t.other[g]
	if c == nil {
		c = &gramCount{}
		t.other[g] = c
	}
	return c
}

// each calls fn once for each distinct trigram of each entry in
// slots[lo:hi], in slot order.
func (t *gramCounts) each(slots []*Entry, lo, hi int, fn func(s uint32, g trigram, c *gramCount)) {
	var buf []trigram
	for s := lo; s < hi; s++ {
		e := slots[s]
		if e == nil {
			continue
		}
		buf = appendEntryTrigrams(buf[:0], e)
		mark := uint32(s) + 1
		for _, g := range buf {
			if c := t.at(g); c.last != mark {
				c.last = mark
				fn(uint32(s), g, c)
			}
		}
	}
}
