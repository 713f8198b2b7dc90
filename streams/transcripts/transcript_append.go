package transcripts

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Append adds entries to the session's transcript and returns the entry
// number of the first. One entry is one publish; more are atomic batches of
// at most MaxBatch entries, each stored entirely or not at all. Entries of
// one batch are contiguous in the transcript; when more than MaxBatch
// entries are given, a concurrent writer may land between two batches.
// If a later batch fails, earlier batches stay written and the error says so.
func (t *Store) Append(ctx context.Context, encKey string, entries ...[]byte) (uint64, error) {
	return t.appendEntries(ctx, encKey, false, 0, entries, false)
}

// AppendIfLen appends entries only if the transcript holds exactly want
// entries, as one writer that must not interleave with another: when the
// transcript is longer (a concurrent writer got there first) it fails with
// an error matching ErrConflict and writes nothing of that batch, where
// Append would retry after the other writer's entries. An importer uses it
// so two runs of the same import cannot both append the same lines.
func (t *Store) AppendIfLen(ctx context.Context, encKey string, want uint64, entries ...[]byte) (uint64, error) {
	return t.appendEntries(ctx, encKey, true, want, entries, false)
}

// AppendEachIfLen is AppendIfLen for a writer that finds and finishes a
// prefix of its own (an importer, whose mark says where its entries start):
// on a single server the entries are published one at a time, each a
// compare-and-set on the one before, so no other writer lands between them,
// but a crash may leave the first few stored. There an atomic batch costs
// far more than the writes it saves: nats-server stages each one in a file
// store of its own, created, synced and removed per batch (4 entries: 29 ms
// as a batch against 2.3 ms as four synced publishes, on a loaded 2-core
// machine). On a cluster, where a batch is one replicated proposal, it is
// AppendIfLen.
func (t *Store) AppendEachIfLen(ctx context.Context, encKey string, want uint64, entries ...[]byte) (uint64, error) {
	return t.appendEntries(ctx, encKey, true, want, entries, !t.replicated)
}

func (t *Store) appendEntries(ctx context.Context, encKey string, exact bool, want uint64, entries [][]byte, each bool) (uint64, error) {
	if len(entries) == 0 {
		return 0, ErrEmptyEntry
	}
	for i, e := range entries {
		if len(e) == 0 {
			return 0, fmt.Errorf("%w: entry %d of %d", ErrEmptyEntry, i, len(entries))
		}
		if len(e) > t.opts.maxEntryBytes {
			return 0, fmt.Errorf("%w: entry %d is %d bytes, limit %d", ErrEntryTooLarge, i, len(e), t.opts.maxEntryBytes)
		}
	}
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return 0, err
	}
	defer cancel()
	defer t.putPipe(p)

	// The newest entry is read beside the head: heads lag the stream by
	// design (transcript_lag.go), and a publish after a lagging head's end
	// would only fail its compare-and-set.
	h, _, err := t.readState(ctx, p, encKey)
	if err != nil {
		return 0, err
	}
	if exact && h.Count != want {
		return 0, fmt.Errorf("%w: %s has %d entries, not %d", ErrConflict, encKey, h.Count, want)
	}
	// After the first CAS failure the next attempt publishes right after the
	// probed newest message (top) and leaves the index catch-up for after the
	// publish, which keeps the window a concurrent writer can steal short.
	var top *rawEntry
	haveTop := false
	var firstN uint64
	for off := 0; off < len(entries); off += MaxBatch {
		batch := entries[off:min(off+MaxBatch, len(entries))]
		var seqs []uint64
		for attempt := 0; ; attempt++ {
			n, prev := h.Count, h.Last
			if haveTop {
				n, prev = 0, 0
				if top != nil {
					n, prev = top.n+1, top.seq
				}
			}
			seqs, err = t.publishEntries(ctx, p, encKey, n, prev, batch, each)
			if off == 0 && (err == nil || len(seqs) > 0) {
				firstN = n
			}
			if err == nil {
				break
			}
			if len(seqs) > 0 {
				// one at a time, the first few landed: they stay (the
				// index catches up at the next read or write), and the
				// caller finds them as its prefix
				if bus.IsWrongLastSeq(err) {
					err = fmt.Errorf("%w: %s changed while appending", ErrConflict, encKey)
				}
				return firstN, t.partial(err, encKey, off+len(seqs), len(entries))
			}
			if !bus.IsWrongLastSeq(err) {
				return firstN, t.partial(err, encKey, off, len(entries))
			}
			if exact {
				// Someone else appended (or the index lagged): the caller
				// re-reads and decides; a blind retry could double.
				return firstN, t.partial(fmt.Errorf("%w: %s changed while appending", ErrConflict, encKey), encKey, off, len(entries))
			}
			if attempt+1 >= maxAppendAttempts {
				return firstN, t.partial(fmt.Errorf("%w (session %s, %d attempts)", ErrConflict, encKey, attempt+1), encKey, off, len(entries))
			}
			if err := backoff(ctx, attempt); err != nil {
				return firstN, t.partial(err, encKey, off, len(entries))
			}
			if h, top, err = t.fetchState(ctx, p, encKey, true); err != nil {
				return firstN, t.partial(err, encKey, off, len(entries))
			}
			haveTop = true
		}
		if !haveTop && !h.bad {
			// Published right after the head's last entry: that is top.
			top = nil
			if h.Count > 0 {
				top = &rawEntry{n: h.Count - 1, seq: h.Last}
			}
		}
		nh, err := t.indexAppend(ctx, p, encKey, h, top, seqs)
		if err != nil {
			// The entries are stored; only the index lags, and the next reader
			// or writer repairs it. Report success for what is in the stream.
			if off+len(batch) == len(entries) {
				return firstN, nil
			}
			return firstN, t.partial(err, encKey, off+len(batch), len(entries))
		}
		h, top, haveTop = nh, nil, false
	}
	return firstN, nil
}

func (t *Store) partial(err error, encKey string, done, total int) error {
	if done == 0 {
		return fmt.Errorf("append to %s: %w", encKey, err)
	}
	return fmt.Errorf("append to %s: %d of %d entries written, then: %w", encKey, done, total, err)
}

// backoff waits a random time below 20 µs << attempt, capped at 20 ms: a
// cap under one append's own time (several ms on a loaded 2-core machine
// under -race) let one of four writers lose all 64 attempts.
func backoff(ctx context.Context, attempt int) error {
	return bus.Sleep(ctx, time.Duration(rand.Int64N(int64(20*time.Microsecond)<<min(attempt, 10))))
}

// publishEntries appends one batch (≤ MaxBatch) as entries n... after the
// entry at stream seq prev, with a
// compare-and-set on the subject and returns the entries' stream sequences.
// each publishes the entries one at a time instead of as an atomic batch;
// its error may then come with the sequences of the entries stored before it.
func (t *Store) publishEntries(ctx context.Context, p *pipe, encKey string, n, prev uint64, batch [][]byte, each bool) ([]uint64, error) {
	subject := t.names.Transcript(encKey)
	if each && len(batch) > 1 {
		seqs := make([]uint64, 0, len(batch))
		for i := range batch {
			s, err := t.publishEntries(ctx, p, encKey, n+uint64(i), prev, batch[i:i+1], false)
			if err != nil {
				return seqs, err
			}
			seqs = append(seqs, s[0])
			prev = s[0]
		}
		return seqs, nil
	}
	msgs := buildEntryMsgs(subject, n, prev, batch, newBatchID)
	last := msgs[len(msgs)-1]
	for _, m := range msgs[:len(msgs)-1] {
		if err := t.nc.PublishMsg(m); err != nil {
			p.broken = true
			return nil, err
		}
	}
	res, err := p.roundTrip(ctx, []*nats.Msg{last})
	if err != nil {
		return nil, err
	}
	ack, err := parseAck(res[0])
	if err != nil {
		return nil, err
	}
	k := uint64(len(batch))
	if k > 1 && ack.Count != k {
		return nil, fmt.Errorf("streams: atomic batch of %d committed %d messages", k, ack.Count)
	}
	if ack.Seq < k {
		return nil, fmt.Errorf("streams: batch ack seq %d for %d messages", ack.Seq, k)
	}
	seqs := make([]uint64, k)
	for i := range seqs {
		seqs[i] = ack.Seq - k + 1 + uint64(i)
	}
	return seqs, nil
}

// buildEntryMsgs builds the messages of one append of entries n, n+1, ...
// whose previous entry is at stream seq prev. One entry: a plain CAS publish.
// More: an ADR-50 atomic batch (Nats-Batch-Id/-Sequence, Nats-Batch-Commit on
// the last), with the CAS header and Sb-Prev on the first message only.
func buildEntryMsgs(subject string, n, prev uint64, batch [][]byte, batchID func() string) []*nats.Msg {
	msgs := make([]*nats.Msg, len(batch))
	prevS := strconv.FormatUint(prev, 10)
	var id string
	if len(batch) > 1 {
		id = batchID()
	}
	for i, data := range batch {
		h := make(nats.Header, 6)
		h[hdrEntry] = []string{strconv.FormatUint(n+uint64(i), 10)}
		if i == 0 {
			h[hdrPrev] = []string{prevS}
			h[jetstream.ExpectedLastSubjSeqHeader] = []string{prevS}
		}
		if id != "" {
			h["Nats-Batch-Id"] = []string{id}
			h["Nats-Batch-Sequence"] = []string{strconv.Itoa(i + 1)}
			if i == len(batch)-1 {
				h["Nats-Batch-Commit"] = []string{"1"}
			}
		}
		msgs[i] = &nats.Msg{Subject: subject, Header: h, Data: data}
	}
	return msgs
}

func newBatchID() string {
	var b [8]byte
	_, _ = cryptorand.Read(b[:])
	return hex.EncodeToString(b[:])
}
