package transcripts

// The per-session index from entry number to stream sequence, in the KV
// bucket `trindex` (history 1):
//
//	h.<encKey>            head: {"v":1,"n":N,"last":L,"tail":[...]}
//	                      N entries, L = stream seq of entry N-1 (0 if none),
//	                      tail = seqs of entries [tailStart(N), N): the
//	                      current partial chunk plus the newest sealed chunk
//	                      (tailStart(N) = 64*(floor(N/64)-1), or 0 below 64),
//	                      so a page of up to 64 newest entries needs no chunk
//	c.<encKey>.<chunkNo>  sealed chunk: [s0,...,s63], the seqs of entries
//	                      [64*chunkNo, 64*chunkNo+64); immutable once written
//
// Sealed chunks are written (and acknowledged) before the head that points
// past them; heads only move by compare-and-set on their KV revision. Every
// head a writer or repairer computes is derived from messages it verified in
// the stream, so two racing updaters compute the same content and the loser
// just re-reads.
//
// The stream is the truth. The head can lag it (a writer died between its
// publish and its head update) or, after an interrupted Delete, be ahead of it.
// reconcile detects both with the O(1) last-for-subject probe and repairs by
// walking back from the newest message through Sb-Prev (or seq-1 inside an
// atomic batch): O(gap) direct gets, never a subject scan.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// HeaderEntry is the header carrying an entry's 0-based number within its
// session, for readers of the stream itself (the search indexer).
const HeaderEntry = hdrEntry

// ChunkSize is the number of sequences in one sealed index chunk.
const ChunkSize = 64

const (
	hdrEntry = "Sb-Entry" // 0-based entry number within the session
	hdrPrev  = "Sb-Prev"  // stream seq of the previous entry; absent inside an atomic batch (= seq-1)

	maxRepairAttempts = 16
	maxWalkWindow     = 256
)

var errHeadConflict = errors.New("streams: index head changed concurrently")

// head is the decoded head record plus the KV revision it was read at.
type head struct {
	V     int      `json:"v"`
	Count uint64   `json:"n"`
	Last  uint64   `json:"last"`
	Tail  []uint64 `json:"tail"`

	rev uint64 // KV revision of the head subject (0: never written); CAS base
	bad bool   // present but undecodable/inconsistent: rebuild from the stream

	// stored is set on a head extended in memory (virtualHead): the head
	// as stored, and unindexed the sequences of the entries past it
	stored    *head
	unindexed []uint64
}

// tailStart is the first entry whose sequence the head itself carries.
func tailStart(n uint64) uint64 {
	if n < ChunkSize {
		return 0
	}
	return (n/ChunkSize - 1) * ChunkSize
}

func (h *head) valid() bool {
	if uint64(len(h.Tail)) != h.Count-tailStart(h.Count) {
		return false
	}
	if h.Count == 0 {
		return h.Last == 0
	}
	if h.Last == 0 {
		return false
	}
	for i := range h.Tail {
		if i > 0 && h.Tail[i] <= h.Tail[i-1] {
			return false
		}
	}
	return h.Tail[0] > 0 && h.Tail[len(h.Tail)-1] == h.Last
}

func encodeHead(h *head) []byte {
	b := make([]byte, 0, 32+len(h.Tail)*9)
	b = append(b, `{"v":1,"n":`...)
	b = strconv.AppendUint(b, h.Count, 10)
	b = append(b, `,"last":`...)
	b = strconv.AppendUint(b, h.Last, 10)
	b = append(b, `,"tail":`...)
	b = appendSeqs(b, h.Tail)
	return append(b, '}')
}

func appendSeqs(b []byte, seqs []uint64) []byte {
	b = append(b, '[')
	for i, s := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, s, 10)
	}
	return append(b, ']')
}

// parseSeqs decodes a JSON array of unsigned integers such as [1,20,300]
// (what appendSeqs writes; whitespace tolerated).
func parseSeqs(b []byte, into []uint64) ([]uint64, error) {
	i := 0
	skip := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
			i++
		}
	}
	skip()
	if i >= len(b) || b[i] != '[' {
		return nil, errors.New("not an array")
	}
	i++
	skip()
	if i < len(b) && b[i] == ']' {
		i++
		skip()
		if i != len(b) {
			return nil, errors.New("trailing data")
		}
		return into, nil
	}
	for {
		skip()
		start := i
		var v uint64
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			d := uint64(b[i] - '0')
			if v > (^uint64(0)-d)/10 {
				return nil, errors.New("number overflow")
			}
			v = v*10 + d
			i++
		}
		if i == start {
			return nil, errors.New("expected a number")
		}
		into = append(into, v)
		skip()
		if i >= len(b) {
			return nil, errors.New("unterminated array")
		}
		if b[i] == ']' {
			i++
			skip()
			if i != len(b) {
				return nil, errors.New("trailing data")
			}
			return into, nil
		}
		if b[i] != ',' {
			return nil, errors.New("expected , or ]")
		}
		i++
	}
}

func decodeChunk(b []byte) ([]uint64, error) {
	seqs, err := parseSeqs(b, make([]uint64, 0, ChunkSize))
	if err != nil {
		return nil, err
	}
	if len(seqs) != ChunkSize {
		return nil, fmt.Errorf("chunk holds %d sequences, want %d", len(seqs), ChunkSize)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			return nil, errors.New("chunk sequences not ascending")
		}
	}
	if seqs[0] == 0 {
		return nil, errors.New("chunk holds sequence 0")
	}
	return seqs, nil
}

// decodeHeadMsg interprets a direct-get reply for h.<key>.
func decodeHeadMsg(m *nats.Msg) (*head, error) {
	switch st := msgStatus(m); st {
	case "":
	case "404":
		return &head{}, nil
	case "503":
		return nil, ErrUnavailable
	default:
		return nil, fmt.Errorf("streams: index head get: status %s %s", st, m.Header.Get("Description"))
	}
	rev, _ := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return &head{rev: rev}, nil
	}
	h := &head{}
	if err := json.Unmarshal(m.Data, h); err != nil || !h.valid() {
		return &head{rev: rev, bad: true}, nil
	}
	h.rev = rev
	return h, nil
}

// sealedChunk is a chunk that an index update must write before its head.
type sealedChunk struct {
	no   uint64
	seqs []uint64
}

// extend returns the head after appending seqs (the stream sequences of
// entries h.Count, h.Count+1, ...) and the chunks that become sealed.
func (h *head) extend(seqs []uint64) (*head, []sealedChunk) {
	base := h.Count - uint64(len(h.Tail)) // = tailStart(h.Count)
	all := make([]uint64, 0, len(h.Tail)+len(seqs))
	all = append(all, h.Tail...)
	all = append(all, seqs...)
	n := h.Count + uint64(len(seqs))
	var sealed []sealedChunk
	for c := h.Count / ChunkSize * ChunkSize; c+ChunkSize <= n; c += ChunkSize {
		sealed = append(sealed, sealedChunk{no: c / ChunkSize, seqs: all[c-base : c-base+ChunkSize : c-base+ChunkSize]})
	}
	nh := &head{V: 1, Count: n, Last: h.Last, Tail: append([]uint64(nil), all[tailStart(n)-base:]...), rev: h.rev}
	if len(seqs) > 0 {
		nh.Last = seqs[len(seqs)-1]
	}
	return nh, sealed
}

// rawEntry is one transcript message as fetched by direct get.
type rawEntry struct {
	seq     uint64
	n       uint64
	prev    uint64
	hasPrev bool
	subject string
	data    []byte
	time    time.Time

	unindexed string // its Sb-Unindexed header: the entries the stored head lacked
}

// parseEntryMsg decodes a direct-get reply. found is false on 404.
func parseEntryMsg(m *nats.Msg) (e rawEntry, found bool, err error) {
	switch st := msgStatus(m); st {
	case "":
	case "404":
		return e, false, nil
	case "503":
		return e, false, ErrUnavailable
	default:
		return e, false, fmt.Errorf("streams: direct get: status %s %s", st, m.Header.Get("Description"))
	}
	h := m.Header
	e.subject = h.Get(jetstream.SubjectHeader)
	if e.seq, err = strconv.ParseUint(h.Get(jetstream.SequenceHeader), 10, 64); err != nil {
		return e, true, fmt.Errorf("%w: direct get reply without Nats-Sequence", ErrIndexCorrupt)
	}
	if e.n, err = strconv.ParseUint(h.Get(hdrEntry), 10, 64); err != nil {
		return e, true, fmt.Errorf("%w: message seq %d on %s has no valid %s header", ErrIndexCorrupt, e.seq, e.subject, hdrEntry)
	}
	if v := h.Get(hdrPrev); v != "" {
		if e.prev, err = strconv.ParseUint(v, 10, 64); err != nil {
			return e, true, fmt.Errorf("%w: message seq %d has a bad %s header %q", ErrIndexCorrupt, e.seq, hdrPrev, v)
		}
		e.hasPrev = true
	}
	if ts := h.Get(jetstream.TimeStampHeaer); ts != "" {
		e.time, _ = time.Parse(time.RFC3339Nano, ts)
	}
	e.unindexed = h.Get(hdrUnindexed)
	e.data = m.Data
	return e, true, nil
}

// prevSeq is the stream sequence of the entry before e.
func (e *rawEntry) prevSeq() uint64 {
	if e.hasPrev {
		return e.prev
	}
	return e.seq - 1
}

// walkBack collects the stream sequences of entries [stopN, top.n] of one
// session by following the chain back from top. It returns them ascending,
// plus the sequence entry stopN points back to (0 when stopN is entry 0 of a
// well-formed transcript). Inside an atomic batch (no Sb-Prev) the previous
// entry is seq-1, so the walk fetches a growing window of lower sequences in
// one wave; after an Sb-Prev jump it fetches one. Cost: O(top.n-stopN) gets.
func (t *Store) walkBack(ctx context.Context, p *pipe, encKey string, top rawEntry, stopN uint64) ([]uint64, uint64, error) {
	subject := t.names.Transcript(encKey)
	if top.n < stopN {
		return nil, 0, fmt.Errorf("%w: walk from entry %d down to %d", ErrIndexCorrupt, top.n, stopN)
	}
	seqs := make([]uint64, top.n-stopN+1)
	cache := map[uint64]*nats.Msg{}
	cur := top
	win := 1
	for {
		seqs[cur.n-stopN] = cur.seq
		prev := cur.prevSeq()
		if cur.n == stopN {
			return seqs, prev, nil
		}
		wantN := cur.n - 1
		if prev == 0 || prev >= cur.seq {
			return nil, 0, fmt.Errorf("%w: session %s entry %d (seq %d) points back to seq %d", ErrIndexCorrupt, encKey, cur.n, cur.seq, prev)
		}
		m, ok := cache[prev]
		if !ok {
			w := 1
			if cur.hasPrev {
				win = 1
			} else {
				win = min(win*2, maxWalkWindow)
				w = win
			}
			w = int(min(uint64(w), wantN-stopN+1, prev))
			reqs := make([]*nats.Msg, w)
			for i := range reqs {
				reqs[i] = t.seqReq(prev - uint64(i))
			}
			res, err := p.roundTrip(ctx, reqs)
			if err != nil {
				return nil, 0, err
			}
			clear(cache)
			for i, r := range res {
				cache[prev-uint64(i)] = r
			}
			m = cache[prev]
		}
		e, found, err := parseEntryMsg(m)
		if err != nil {
			return nil, 0, err
		}
		if !found {
			if e, found, err = t.leaderGet(ctx, prev, ""); err != nil {
				return nil, 0, err
			}
			if !found {
				return nil, 0, fmt.Errorf("%w: session %s entry %d (seq %d)", ErrEntryMissing, encKey, wantN, prev)
			}
		}
		if e.subject != subject || e.n != wantN || e.seq != prev {
			return nil, 0, fmt.Errorf("%w: session %s: seq %d holds %s entry %d, want %s entry %d", ErrIndexCorrupt, encKey, prev, e.subject, e.n, subject, wantN)
		}
		cur = e
	}
}

// indexAppend moves the index past an append that the stream accepted:
// seqs are its entries, appended right after top (nil: the transcript was
// empty), and h is the head as read before. The common case is one head CAS
// (plus sealed chunks); a lagging head is caught up by walking back from
// top; anything stranger, or a lost CAS, goes through the full repair.
func (t *Store) indexAppend(ctx context.Context, p *pipe, encKey string, h *head, top *rawEntry, seqs []uint64) (*head, error) {
	if stored, gap := h.unwrap(); len(gap) > 0 {
		// appended after a head extended in memory: the stored head moves
		// past the gap and the new entries, sealing what the gap fills
		h, seqs = stored, append(slices.Clone(gap), seqs...)
		top = nil
		if h.Count > 0 {
			top = &rawEntry{n: h.Count - 1, seq: h.Last}
		}
	} else if v := virtualHead(h, top); v != nil {
		// a writer that read the stored head, not the newest entry, and
		// lost its first compare-and-set: the newest entry lists the gap
		seqs = append(slices.Clone(v.unindexed), seqs...)
		top = nil
		if h.Count > 0 {
			top = &rawEntry{n: h.Count - 1, seq: h.Last}
		}
	}
	var base *head
	switch {
	case h.bad:
	case top == nil:
		base = h
		if h.Count != 0 {
			base = &head{rev: h.rev} // head ahead of an empty (purged) transcript
		}
	case h.Count == top.n+1 && h.Last == top.seq:
		base = h
	case top.seq > h.Last && top.n >= h.Count:
		gap, prev, err := t.walkBack(ctx, p, encKey, *top, h.Count)
		if err != nil {
			return nil, err
		}
		if prev == h.Last {
			base, seqs = h, append(gap, seqs...)
		}
	}
	if base != nil {
		nh, sealed := base.extend(seqs)
		err := t.commitHead(ctx, p, encKey, nh, sealed)
		if err == nil {
			return nh, nil
		}
		if !errors.Is(err, errHeadConflict) {
			return nil, err
		}
	}
	h, _, err := t.loadState(ctx, p, encKey, true)
	return h, err
}

// reconcile makes h agree with the stream, whose newest entry for the session
// is top (nil: none). It returns h itself when they agree.
func (t *Store) reconcile(ctx context.Context, p *pipe, encKey string, h *head, top *rawEntry) (*head, error) {
	subject := t.names.Transcript(encKey)
	if top != nil && top.subject != subject {
		return nil, fmt.Errorf("%w: last message for %s reports subject %s", ErrIndexCorrupt, subject, top.subject)
	}
	if !h.bad {
		if top == nil && h.Count == 0 {
			return h, nil
		}
		if top != nil && h.Count > 0 && top.seq == h.Last && top.n == h.Count-1 {
			return h, nil
		}
	}
	if t.replicated && (top == nil || top.seq < h.Last) {
		// The head and the probe went to two leaders at once, so the probe
		// may have been answered before the write that the head already
		// counts. Before treating the head as ahead of the stream, ask the
		// stream's leader again, now that the head is known.
		e, found, err := t.leaderGet(ctx, 0, subject)
		if err != nil {
			return nil, err
		}
		top = nil
		if found {
			top = &e
		}
		if !h.bad && ((top == nil && h.Count == 0) || (top != nil && h.Count > 0 && top.seq == h.Last && top.n == h.Count-1)) {
			return h, nil
		}
	}
	if top == nil {
		// Head ahead of an empty transcript: the subject was purged (an
		// interrupted Delete, or out-of-band). Reset the head.
		empty := &head{V: 1, rev: h.rev}
		return empty, t.commitHead(ctx, p, encKey, empty, nil)
	}
	if !h.bad && top.seq > h.Last && top.n >= h.Count {
		// Head behind: a writer stopped between publish and head update.
		seqs, prev, err := t.walkBack(ctx, p, encKey, *top, h.Count)
		if err != nil {
			return nil, err
		}
		if prev == h.Last {
			nh, sealed := h.extend(seqs)
			return nh, t.commitHead(ctx, p, encKey, nh, sealed)
		}
		// The chain does not lead back to the head: the head is from an
		// earlier incarnation of the transcript. Rebuild below.
	}
	// Head unusable (undecodable, ahead of the stream, or from before a
	// purge): rebuild from the stream. O(entries since the purge).
	seqs, prev, err := t.walkBack(ctx, p, encKey, *top, 0)
	if err != nil {
		return nil, err
	}
	if prev != 0 {
		return nil, fmt.Errorf("%w: session %s entry 0 (seq %d) points back to seq %d", ErrIndexCorrupt, encKey, seqs[0], prev)
	}
	nh, sealed := (&head{rev: h.rev}).extend(seqs)
	return nh, t.commitHead(ctx, p, encKey, nh, sealed)
}

// commitHead writes the sealed chunks, waits for their acks, then CASes the
// head from nh.rev to nh; on success nh.rev is the new revision. A lost CAS
// returns errHeadConflict.
func (t *Store) commitHead(ctx context.Context, p *pipe, encKey string, nh *head, sealed []sealedChunk) error {
	if len(sealed) > 0 {
		reqs := make([]*nats.Msg, len(sealed))
		for i, c := range sealed {
			reqs[i] = &nats.Msg{Subject: t.kvPre + chunkKey(encKey, c.no), Data: appendSeqs(make([]byte, 0, ChunkSize*9), c.seqs)}
		}
		res, err := p.roundTrip(ctx, reqs)
		if err != nil {
			return err
		}
		for i, r := range res {
			if _, err := parseAck(r); err != nil {
				return fmt.Errorf("streams: write index chunk %s: %w", chunkKey(encKey, sealed[i].no), err)
			}
		}
	}
	m := &nats.Msg{Subject: t.kvPre + headKey(encKey), Header: nats.Header{}, Data: encodeHead(nh)}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(nh.rev, 10))
	res, err := p.roundTrip(ctx, []*nats.Msg{m})
	if err != nil {
		return err
	}
	ack, err := parseAck(res[0])
	if bus.IsWrongLastSeq(err) {
		return errHeadConflict
	}
	if err != nil {
		return fmt.Errorf("streams: write index head %s: %w", headKey(encKey), err)
	}
	nh.rev = ack.Seq
	return nil
}

func headKey(encKey string) string { return "h." + encKey }

func chunkKey(encKey string, no uint64) string {
	return "c." + encKey + "." + strconv.FormatUint(no, 10)
}
