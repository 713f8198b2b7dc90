package transcripts

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Loader bulk-loads transcripts (imports, benchmarks) at async-publish speed.
//
// Entries are published without waiting: each session has at most one append
// in flight, whose compare-and-set header (expected last subject sequence)
// comes from the previous append's ack, so round-robin traffic over many
// sessions keeps thousands of publishes in flight. Consecutive entries of the
// same session are grouped into atomic batches (≤ MaxBatch), so a single
// session's load also costs one round trip per batch, not per entry. Sealed
// index chunks are written asynchronously as they fill; the heads are written
// by Flush, after every chunk is acknowledged.
//
// Sessions start from the optimistic assumption "empty": if one is not, its
// first append fails the CAS and the loader reads (and repairs) the real
// state, then retries. A Loader is not safe for concurrent use. Data passed
// to Add must not be modified until Flush returns.
type Loader struct {
	t        *Store
	sub      *nats.Subscription
	ch       chan *nats.Msg
	prefix   string
	nextID   uint64
	sync     *pipe
	inflight map[uint64]*loadOp
	msgs     int // messages in flight (a batch counts all its messages)
	batches  int // atomic batches in flight
	plain    int // single-message publishes in flight
	queue    []*loadOp
	queued   int // messages of the queued appends (grouped in pump)
	sess     map[string]*loadSess
	runS     *loadSess
	run      [][]byte
	added    uint64
	err      error
	stall    *time.Timer
}

const (
	loaderMaxMsgs    = 8192 // messages in flight
	loaderMaxBatches = 32   // atomic batches in flight (server allows 50 per stream)
	// loaderMaxPlain bounds single-message publishes (index chunks and
	// heads, lone entries) in flight: with sync always each costs the
	// server an fsync, and thousands queued at once left none acknowledged
	// within the stall timeout on a busy disk.
	loaderMaxPlain   = 256
	loaderMaxRetries = 8
)

type loadKind int

const (
	opEntries loadKind = iota
	opChunk
	opHead
	opGroup // appends of several sessions in one atomic batch (transcript_loader_group.go)
)

type loadOp struct {
	kind     loadKind
	s        *loadSess
	data     [][]byte // opEntries
	body     []byte   // opChunk, opHead
	chunk    uint64
	attempts int
	nmsgs    int
	parts    []*loadOp // opGroup: one opEntries per session, in stream order
}

type loadSess struct {
	key     string
	subject string
	count   uint64   // entries stored (acked)
	last    uint64   // seq of entry count-1
	open    []uint64 // seqs of entries [64*floor(count/64), count)
	prev    []uint64 // seqs of the newest sealed chunk (nil below 64 entries)
	rev     uint64   // head revision the final head write CASes from
	pending *loadOp  // the session's unacknowledged append (in flight or queued)
	dirty   bool     // head behind count
}

// NewLoader starts a bulk load. Call Flush to finish it and Close to release it.
func (t *Store) NewLoader() (*Loader, error) {
	sp, err := t.getPipe()
	if err != nil {
		return nil, err
	}
	inbox := t.nc.NewInbox()
	ch := make(chan *nats.Msg, loaderMaxMsgs+64)
	sub, err := t.nc.ChanSubscribe(inbox+".*", ch)
	if err != nil {
		t.putPipe(sp)
		return nil, err
	}
	return &Loader{
		t: t, sub: sub, ch: ch, prefix: inbox + ".", sync: sp,
		inflight: map[uint64]*loadOp{}, sess: map[string]*loadSess{},
	}, nil
}

// Close releases the loader's subscriptions (it does not flush).
func (l *Loader) Close() {
	if l.sub != nil {
		_ = l.sub.Unsubscribe()
		l.sub = nil
		l.t.putPipe(l.sync)
	}
}

// Added is the number of entries passed to Add so far.
func (l *Loader) Added() uint64 { return l.added }

// Add queues one entry for the session; it may block while the in-flight
// window is full.
func (l *Loader) Add(ctx context.Context, encKey string, data []byte) error {
	if l.err != nil {
		return l.err
	}
	if len(data) == 0 {
		return ErrEmptyEntry
	}
	if len(data) > l.t.opts.maxEntryBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrEntryTooLarge, len(data), l.t.opts.maxEntryBytes)
	}
	if l.runS == nil || l.runS.key != encKey || len(l.run) >= MaxBatch {
		if err := l.flushRun(ctx); err != nil {
			return err
		}
		s, err := l.session(encKey)
		if err != nil {
			return err
		}
		l.runS = s
	}
	l.run = append(l.run, data)
	l.added++
	return nil
}

func (l *Loader) session(encKey string) (*loadSess, error) {
	if s := l.sess[encKey]; s != nil {
		return s, nil
	}
	if err := ValidateKey(encKey); err != nil {
		return nil, err
	}
	s := &loadSess{key: encKey, subject: l.t.names.Transcript(encKey)}
	l.sess[encKey] = s
	return s, nil
}

// flushRun turns the buffered run of one session into an append.
func (l *Loader) flushRun(ctx context.Context) error {
	s, run := l.runS, l.run
	if s == nil || len(run) == 0 {
		return nil
	}
	l.runS, l.run = nil, nil
	for s.pending != nil {
		if err := l.pump(ctx); err != nil {
			return l.fail(err)
		}
		if s.pending == nil {
			break
		}
		if err := l.waitOne(ctx); err != nil {
			return l.fail(err)
		}
	}
	op := &loadOp{kind: opEntries, s: s, data: run}
	s.pending = op
	l.queue = append(l.queue, op)
	l.queued += len(run)
	if l.queued < MaxBatch {
		// short runs (round-robin loads) wait to share an atomic batch
		return nil
	}
	return l.fail(l.pump(ctx))
}

func (l *Loader) fail(err error) error {
	if err != nil && l.err == nil {
		l.err = err
	}
	return err
}

// pump sends queued operations, waiting for acks while the window is full.
func (l *Loader) pump(ctx context.Context) error {
	for len(l.queue) > 0 {
		op, k := l.nextOp()
		n := op.msgCount()
		for len(l.inflight) > 0 && (l.msgs+n > loaderMaxMsgs || (n > 1 && l.batches >= loaderMaxBatches) || (n == 1 && l.plain >= loaderMaxPlain)) {
			if err := l.waitOne(ctx); err != nil {
				return err
			}
		}
		l.queue = l.queue[k:]
		if err := l.send(op); err != nil {
			return err
		}
	}
	return nil
}

func (l *Loader) send(op *loadOp) error {
	id := l.nextID
	l.nextID++
	reply := l.prefix + strconv.FormatUint(id, 10)
	var msgs []*nats.Msg
	switch op.kind {
	case opEntries:
		s := op.s
		msgs = buildEntryMsgs(s.subject, s.count, s.last, op.data, newBatchID)
	case opChunk:
		msgs = []*nats.Msg{{Subject: l.t.kvPre + chunkKey(op.s.key, op.chunk), Data: op.body}}
	case opHead:
		m := &nats.Msg{Subject: l.t.kvPre + headKey(op.s.key), Header: nats.Header{}, Data: op.body}
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(op.s.rev, 10))
		msgs = []*nats.Msg{m}
	case opGroup:
		msgs = groupMsgs(op)
	}
	msgs[len(msgs)-1].Reply = reply
	for _, m := range msgs {
		if err := l.t.nc.PublishMsg(m); err != nil {
			return err
		}
	}
	op.nmsgs = len(msgs)
	l.msgs += op.nmsgs
	if op.nmsgs > 1 {
		l.batches++
	} else {
		l.plain++
	}
	l.inflight[id] = op
	return nil
}

// waitOne handles one ack.
func (l *Loader) waitOne(ctx context.Context) error {
	if len(l.inflight) == 0 {
		return nil
	}
	var m *nats.Msg
	select {
	case m = <-l.ch:
	default:
		if l.stall == nil {
			l.stall = time.NewTimer(l.t.opts.timeout)
		} else {
			l.stall.Reset(l.t.opts.timeout)
		}
		select {
		case m = <-l.ch:
			l.stall.Stop()
		case <-l.stall.C:
			return fmt.Errorf("streams: loader: no ack within %v, %d outstanding", l.t.opts.timeout, len(l.inflight))
		case <-ctx.Done():
			l.stall.Stop()
			return fmt.Errorf("streams: loader: %d acks outstanding: %w", len(l.inflight), ctx.Err())
		}
	}
	if len(m.Subject) <= len(l.prefix) {
		return nil
	}
	id, err := strconv.ParseUint(m.Subject[len(l.prefix):], 10, 64)
	if err != nil {
		return nil
	}
	op := l.inflight[id]
	if op == nil {
		return nil
	}
	delete(l.inflight, id)
	l.msgs -= op.nmsgs
	if op.nmsgs > 1 {
		l.batches--
	} else {
		l.plain--
	}
	ack, err := parseAck(m)
	switch op.kind {
	case opEntries:
		return l.entriesAcked(ctx, op, ack, err)
	case opGroup:
		return l.groupAcked(ctx, op, ack, err)
	case opChunk:
		if err != nil {
			return fmt.Errorf("streams: loader: write index chunk %s: %w", chunkKey(op.s.key, op.chunk), err)
		}
	case opHead:
		s := op.s
		if bus.IsWrongLastSeq(err) {
			// The head changed under us: let the repair path fold our entries in.
			return l.refresh(ctx, s)
		}
		if err != nil {
			return fmt.Errorf("streams: loader: write index head %s: %w", headKey(s.key), err)
		}
		s.rev = ack.Seq
	}
	return nil
}

func (l *Loader) entriesAcked(ctx context.Context, op *loadOp, ack pubAck, err error) error {
	s := op.s
	k := uint64(len(op.data))
	if bus.IsWrongLastSeq(err) {
		op.attempts++
		if op.attempts > loaderMaxRetries {
			return fmt.Errorf("%w (loader, session %s)", ErrConflict, s.key)
		}
		if err := l.refresh(ctx, s); err != nil {
			return err
		}
		l.queue = append(l.queue, op) // s.pending stays op: later runs wait for it
		l.queued += int(k)
		return nil
	}
	if err != nil {
		return fmt.Errorf("streams: loader: append %d entries to %s: %w", k, s.key, err)
	}
	if k > 1 && ack.Count != k {
		return fmt.Errorf("streams: loader: atomic batch of %d committed %d messages", k, ack.Count)
	}
	first := ack.Seq - k + 1
	for i := uint64(0); i < k; i++ {
		s.open = append(s.open, first+i)
		if n := s.count + i + 1; n%ChunkSize == 0 {
			l.queue = append(l.queue, &loadOp{kind: opChunk, s: s, chunk: n/ChunkSize - 1, body: appendSeqs(make([]byte, 0, ChunkSize*9), s.open)})
			s.prev, s.open = s.open, make([]uint64, 0, ChunkSize)
		}
	}
	s.count += k
	s.last = ack.Seq
	s.dirty = true
	s.pending = nil
	return nil
}

// refresh replaces the session's state by the repaired state in the store.
func (l *Loader) refresh(ctx context.Context, s *loadSess) error {
	h, _, err := l.t.loadState(ctx, l.sync, s.key, true)
	if err != nil {
		return fmt.Errorf("streams: loader: read state of %s: %w", s.key, err)
	}
	s.count, s.last, s.rev = h.Count, h.Last, h.rev
	split := len(h.Tail) - int(h.Count%ChunkSize)
	s.prev = append([]uint64(nil), h.Tail[:split]...)
	s.open = append(make([]uint64, 0, ChunkSize), h.Tail[split:]...)
	s.dirty = false
	return nil
}

func (l *Loader) drain(ctx context.Context) error {
	for len(l.queue) > 0 || len(l.inflight) > 0 {
		if err := l.pump(ctx); err != nil {
			return err
		}
		if err := l.waitOne(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Flush waits for every append and chunk, then writes the index heads
// (compare-and-set) and waits for them. The loader stays usable.
func (l *Loader) Flush(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	if err := l.flushRun(ctx); err != nil {
		return err
	}
	if err := l.drain(ctx); err != nil {
		return l.fail(err)
	}
	for _, s := range l.sess {
		if s.dirty {
			s.dirty = false
			h := &head{V: 1, Count: s.count, Last: s.last, Tail: append(append([]uint64(nil), s.prev...), s.open...)}
			l.queue = append(l.queue, &loadOp{kind: opHead, s: s, body: encodeHead(h)})
		}
	}
	return l.fail(l.drain(ctx))
}

// BulkLoad appends every (encKey, entry) pair of seq with a Loader and
// returns the number of entries written. Interleave sessions freely;
// consecutive entries of one session become atomic batches.
func (t *Store) BulkLoad(ctx context.Context, seq iter.Seq2[string, []byte]) (uint64, error) {
	l, err := t.NewLoader()
	if err != nil {
		return 0, err
	}
	defer l.Close()
	for k, d := range seq {
		if err := l.Add(ctx, k, d); err != nil {
			return 0, err
		}
	}
	if err := l.Flush(ctx); err != nil {
		return 0, err
	}
	return l.added, nil
}
