package transcripts

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

// Count is the number of entries in the session's transcript (repairing a
// lagging index first).
func (t *Store) Count(ctx context.Context, encKey string) (uint64, error) {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return 0, err
	}
	defer cancel()
	defer t.putPipe(p)
	h, _, err := t.readState(ctx, p, encKey)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", encKey, err)
	}
	return h.Count, nil
}

// Read returns entries [from, to), clamped to the transcript's length.
func (t *Store) Read(ctx context.Context, encKey string, from, to uint64) ([]Entry, error) {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer t.putPipe(p)
	h, newest, err := t.readState(ctx, p, encKey)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", encKey, err)
	}
	to = min(to, h.Count)
	if from >= to {
		return nil, nil
	}
	es, err := t.fetch(ctx, p, encKey, h, from, to, newest, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s [%d,%d): %w", encKey, from, to, err)
	}
	return es, nil
}

// Newest reads the session's newest entry alone: one direct get of the
// transcript subject's last message, the index not read (on a replicated
// store the stream leader answers, as for any read that must be current).
// found is false for an empty transcript. Appends give every entry a new,
// higher stream sequence and a delete purges the subject, so within one
// Generation an unchanged newest entry (sequence and number) means an
// unchanged transcript: what lets a caller keep what it made of the tail.
//
// also are requests of the caller's own (reads of other streams) sent in
// the same wave; their replies come back in order, unparsed. They are nil
// when the wave failed.
func (t *Store) Newest(ctx context.Context, encKey string, also ...*nats.Msg) (e Entry, found bool, replies []*nats.Msg, err error) {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return Entry{}, false, nil, err
	}
	defer cancel()
	defer t.putPipe(p)
	subject := t.names.Transcript(encKey)
	req := t.lastForReq(subject)
	if t.replicated {
		req = bus.LeaderGetRequest(t.api, t.names.TranscriptsStream(), 0, subject)
	}
	res, err := p.roundTrip(ctx, append([]*nats.Msg{req}, also...))
	if err != nil {
		return Entry{}, false, nil, fmt.Errorf("newest entry of %s: %w", encKey, err)
	}
	replies = res[1:]
	if t.replicated {
		if res[0], err = bus.LeaderGetReply(t.names.TranscriptsStream(), res[0]); err != nil {
			return Entry{}, false, replies, fmt.Errorf("newest entry of %s: %w", encKey, leaderErr(t.names.TranscriptsStream(), err))
		}
	}
	top, found, err := parseEntryMsg(res[0])
	if err != nil {
		return Entry{}, false, replies, fmt.Errorf("newest entry of %s: %w", encKey, err)
	}
	if !found {
		return Entry{}, false, replies, nil
	}
	if top.subject != subject {
		return Entry{}, false, replies, fmt.Errorf("%w: newest entry of %s came from %q", ErrIndexCorrupt, encKey, top.subject)
	}
	return Entry{N: top.n, Seq: top.seq, Data: top.data, Time: top.time}, true, replies, nil
}

// Tail returns the newest limit entries after skipping the offset newest
// ones, oldest first, and the transcript's length. offset 0 is the tail;
// an offset at or past the length gives no entries.
func (t *Store) Tail(ctx context.Context, encKey string, limit int, offset uint64) ([]Entry, uint64, error) {
	return t.TailCached(ctx, encKey, limit, offset, nil)
}

// TailCached is Tail for a caller that keeps what it made of entries it
// read before: entries for which cached(seq, n) is true are not fetched
// and come back with their N and Seq but no Data (nor Time). The index
// still decides which entries the page holds; only the direct gets of
// known, immutable messages are skipped (within one Generation). nil
// cached fetches everything.
func (t *Store) TailCached(ctx context.Context, encKey string, limit int, offset uint64, cached func(seq, n uint64) bool) ([]Entry, uint64, error) {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return nil, 0, err
	}
	defer cancel()
	defer t.putPipe(p)
	if es, total, ok, err := t.tailPrefetched(ctx, p, encKey, limit, offset, cached); ok || err != nil {
		return es, total, err
	}
	h, newest, err := t.readState(ctx, p, encKey)
	if err != nil {
		return nil, 0, fmt.Errorf("tail %s: %w", encKey, err)
	}
	total := h.Count
	t.hints.put(encKey, total)
	if limit <= 0 || offset >= total {
		return nil, total, nil
	}
	to := total - offset
	from := to - min(uint64(limit), to)
	es, err := t.fetch(ctx, p, encKey, h, from, to, newest, cached)
	if err != nil {
		return nil, total, fmt.Errorf("tail %s [%d,%d): %w", encKey, from, to, err)
	}
	return es, total, nil
}

// fetch reads entries [from, to) (to ≤ h.Count): the sequences come from the
// head and the sealed chunks the range spans (one pipelined wave), the
// messages from pipelined direct gets by sequence (a second wave). newest,
// when set, is entry h.Count-1 already fetched by the probe. Entries for
// which cached(seq, n) is true are not fetched (no Data).
func (t *Store) fetch(ctx context.Context, p *pipe, encKey string, h *head, from, to uint64, newest *rawEntry, cached func(seq, n uint64) bool) ([]Entry, error) {
	seqs, err := t.lookup(ctx, p, encKey, h, from, to)
	if err != nil {
		return nil, err
	}
	return t.fetchSeqs(ctx, p, encKey, h, from, to, seqs, newest, cached)
}

// fetchSeqs is fetch with the entries' sequences already looked up.
func (t *Store) fetchSeqs(ctx context.Context, p *pipe, encKey string, h *head, from, to uint64, seqs []uint64, newest *rawEntry, cached func(seq, n uint64) bool) ([]Entry, error) {
	out := make([]Entry, len(seqs))
	var reqs []*nats.Msg
	var want []int // the indices of seqs fetched, in request order
	for i, seq := range seqs {
		n := from + uint64(i)
		out[i] = Entry{N: n, Seq: seq}
		switch {
		case newest != nil && to == h.Count && i == len(seqs)-1 && newest.seq == seq:
			if err := t.check(encKey, *newest, n, seq); err != nil {
				return nil, err
			}
			out[i] = Entry{N: newest.n, Seq: newest.seq, Data: newest.data, Time: newest.time}
		case cached != nil && cached(seq, n):
		default:
			reqs = append(reqs, t.seqReq(seq))
			want = append(want, i)
		}
	}
	if len(reqs) == 0 {
		return out, nil
	}
	res, err := p.roundTrip(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for j, i := range want {
		e, found, err := parseEntryMsg(res[j])
		if err != nil {
			return nil, err
		}
		if !found {
			if e, found, err = t.leaderGet(ctx, seqs[i], ""); err != nil {
				return nil, err
			}
			if !found {
				return nil, fmt.Errorf("%w: session %s entry %d (seq %d)", ErrEntryMissing, encKey, from+uint64(i), seqs[i])
			}
		}
		if err := t.check(encKey, e, from+uint64(i), seqs[i]); err != nil {
			return nil, err
		}
		out[i] = Entry{N: e.n, Seq: e.seq, Data: e.data, Time: e.time}
	}
	return out, nil
}

// check verifies that the message fetched for entry n of encKey, by the
// index's sequence seq, is that entry.
func (t *Store) check(encKey string, e rawEntry, n, seq uint64) error {
	if subject := t.names.Transcript(encKey); e.subject != subject || e.n != n || e.seq != seq {
		return fmt.Errorf("%w: session %s entry %d: index says seq %d, which holds %s entry %d", ErrIndexCorrupt, encKey, n, seq, e.subject, e.n)
	}
	return nil
}

// lookup returns the stream sequences of entries [from, to).
func (t *Store) lookup(ctx context.Context, p *pipe, encKey string, h *head, from, to uint64) ([]uint64, error) {
	seqs := make([]uint64, 0, to-from)
	sealedEnd := h.Count - uint64(len(h.Tail)) // entries below come from chunks
	if from < sealedEnd {
		k0, k1 := from/ChunkSize, (min(to, sealedEnd)-1)/ChunkSize
		// A chunk is written before the head that points past it, but a
		// follower may not have it yet (or still hold the chunk of a
		// transcript deleted since): on a replicated bucket the leader,
		// which has every acknowledged write, answers.
		reqs := make([]*nats.Msg, 0, k1-k0+1)
		var streams []string
		for k := k0; k <= k1; k++ {
			if t.replicated {
				reqs = append(reqs, t.kvLeaderReq(chunkKey(encKey, k)))
				streams = append(streams, t.kvName)
			} else {
				reqs = append(reqs, t.kvLastReq(chunkKey(encKey, k)))
			}
		}
		res, err := p.roundTrip(ctx, reqs)
		if err != nil {
			return nil, err
		}
		if t.replicated {
			if err := leaderReplies(streams, res); err != nil {
				return nil, err
			}
		}
		if seqs, err = appendChunkSeqs(seqs, encKey, h, res, k0, from, to); err != nil {
			return nil, err
		}
	}
	if to > sealedEnd {
		seqs = append(seqs, h.Tail[max(from, sealedEnd)-sealedEnd:to-sealedEnd]...)
	}
	return seqs, nil
}

// appendChunkSeqs appends the sequences of entries [from, to) that the
// replies res, chunks k0, k0+1, ..., hold.
func appendChunkSeqs(seqs []uint64, encKey string, h *head, res []*nats.Msg, k0, from, to uint64) ([]uint64, error) {
	for i, m := range res {
		k := k0 + uint64(i)
		switch st := msgStatus(m); st {
		case "":
		case "404":
			return nil, fmt.Errorf("%w: index chunk %s is missing (head says %d entries)", ErrIndexCorrupt, chunkKey(encKey, k), h.Count)
		case "503":
			return nil, ErrUnavailable
		default:
			return nil, fmt.Errorf("streams: index chunk get: status %s %s", st, m.Header.Get("Description"))
		}
		chunk, err := decodeChunk(m.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: index chunk %s: %v", ErrIndexCorrupt, chunkKey(encKey, k), err)
		}
		lo, hi := k*ChunkSize, k*ChunkSize+ChunkSize
		seqs = append(seqs, chunk[max(from, lo)-lo:min(to, hi)-lo]...)
	}
	return seqs, nil
}
