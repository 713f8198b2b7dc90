package transcripts

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"
)

// A page back in a long transcript (offset past the head's tail) costs a
// second wave: the head says which sealed chunks hold the page's sequences,
// then the chunks are read. A reader paging a transcript asks again with
// the same length, so the store remembers each transcript's last length
// seen and, when a page needs chunks, reads them in the head's wave. The
// chunks come from the server in that wave, not from memory; they are used
// only when the head read beside them says that length (the chunks a head
// covers are written before it), else the page takes the two waves.

// countHints is a bounded map of transcripts' last lengths seen.
type countHints struct {
	mu sync.Mutex
	m  map[string]uint64
}

const maxCountHints = 4096

func (c *countHints) get(encKey string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[encKey]
}

func (c *countHints) put(encKey string, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCountHints {
		if _, ok := c.m[encKey]; !ok {
			c.m = make(map[string]uint64) // start over rather than track use
		}
	}
	c.m[encKey] = n
}

// tailPrefetched is TailCached in one wave of index reads when the
// transcript's length is the one seen last. ok false: not taken (no hint,
// no chunk needed, a replicated store, or the length changed), so the
// caller reads as usual.
func (t *Store) tailPrefetched(ctx context.Context, p *pipe, encKey string, limit int, offset uint64, cached func(seq, n uint64) bool) ([]Entry, uint64, bool, error) {
	n := t.hints.get(encKey)
	if t.replicated || limit <= 0 || offset == 0 || offset >= n {
		return nil, 0, false, nil
	}
	to := n - offset
	from := to - min(uint64(limit), to)
	sealedEnd := tailStart(n)
	if from >= sealedEnd {
		return nil, 0, false, nil
	}
	k0, k1 := from/ChunkSize, (min(to, sealedEnd)-1)/ChunkSize
	reqs := []*nats.Msg{t.kvLastReq(headKey(encKey)), t.lastForReq(t.names.Transcript(encKey))}
	for k := k0; k <= k1; k++ {
		reqs = append(reqs, t.kvLastReq(chunkKey(encKey, k)))
	}
	res, err := p.roundTrip(ctx, reqs)
	if err != nil {
		return nil, 0, false, err
	}
	h, err := decodeHeadMsg(res[0])
	if err != nil {
		return nil, 0, false, nil
	}
	top, found, err := parseEntryMsg(res[1])
	if err != nil || !found || top.subject != t.names.Transcript(encKey) {
		return nil, 0, false, nil
	}
	if v := virtualHead(h, &top); v != nil && !consistent(h, &top) {
		h = v // lagging by what the newest entry lists
	}
	if h.bad || h.Count != n || uint64(len(h.Tail)) != n-sealedEnd || top.seq != h.Last || top.n != n-1 {
		return nil, 0, false, nil // lagging further or odd: loadState repairs
	}
	seqs, err := appendChunkSeqs(make([]uint64, 0, to-from), encKey, h, res[2:], k0, from, to)
	if err != nil {
		return nil, 0, false, nil
	}
	if to > sealedEnd {
		seqs = append(seqs, h.Tail[max(from, sealedEnd)-sealedEnd:to-sealedEnd]...)
	}
	es, err := t.fetchSeqs(ctx, p, encKey, h, from, to, seqs, &top, cached)
	if err != nil {
		return nil, 0, false, err
	}
	return es, n, true, nil
}
