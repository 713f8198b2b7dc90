package transcripts

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

// Cursor is one writer's view of the end of a session transcript, for a run
// that appends a few entries in a row (its prompt, later its reply) and
// tells from the newest entry (Top) whether another run holds the session.
// Each append through it is a single compare-and-set publish, with no index
// read first, and the index moves only in Flush, which its writer calls
// when FlushDue says so. Until then each entry it appends lists what the
// stored head lacks (transcript_lag.go), so readers extend the head from
// the newest entry, and a writer that dies before Flush leaves nothing
// wrong behind (a longer gap is repaired by the Sb-Prev walk-back).
//
// A Cursor is not safe for concurrent use.
type Cursor struct {
	encKey string
	h      *head     // index head, consistent with the stream when read
	top    *rawEntry // the entry at h's end; nil when the transcript was empty
	seqs   []uint64  // appended through the cursor, not yet in the index
	// last is the newest entry's data as the cursor knows it: the last one
	// appended through it, else top's when it was read; nil when unknown
	last []byte
}

// OpenCursor reads the transcript's end. With exact set it reads the index
// head and the newest entry in one round trip, extending a head that lags
// by what that entry lists, and the cursor knows the newest entry's data
// (Top); every writer in the gateway opens this way, since heads lag by
// design. Without it, only the head is read (one get): behind a lagging
// head the first AppendAt's compare-and-set fails with ErrConflict.
func (t *Store) OpenCursor(ctx context.Context, encKey string, exact bool) (*Cursor, error) {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer t.putPipe(p)
	var h *head
	var top *rawEntry
	if exact {
		h, top, err = t.readState(ctx, p, encKey)
	} else {
		h, top, err = t.loadState(ctx, p, encKey, false)
	}
	if err != nil {
		return nil, fmt.Errorf("read end of %s: %w", encKey, err)
	}
	c := &Cursor{encKey: encKey, h: h, top: top}
	if top == nil && h.Count > 0 {
		c.top = &rawEntry{n: h.Count - 1, seq: h.Last}
	}
	if top != nil {
		c.last = top.data
	}
	return c, nil
}

// Top is the data of the transcript's newest entry as the cursor knows
// it: the last one appended through it, or the one an exact open read.
// known is false when the cursor never saw it (a head-only open of a
// transcript that is not empty); data is nil and known true when the
// transcript is empty. A writer outside the cursor may have appended
// since: only a compare-and-set through it tells.
func (c *Cursor) Top() (data []byte, known bool) {
	if c.Len() == 0 {
		return nil, true
	}
	return c.last, c.last != nil
}

// Len is the transcript's length as the cursor knows it.
func (c *Cursor) Len() uint64 { return c.h.Count + uint64(len(c.seqs)) }

func (c *Cursor) lastSeq() uint64 {
	if n := len(c.seqs); n > 0 {
		return c.seqs[n-1]
	}
	if c.h.Count == 0 {
		return 0
	}
	return c.h.Last
}

// AppendAt appends one entry at the cursor's end with message id msgID (the
// server drops a repeat of the id within TranscriptDedupeWindow). It returns
// the entry's number; dup reports that the server had the id already, in
// which case nothing was written and n is the cursor's unchanged length. A
// concurrent writer outside the cursor makes it fail with an error matching
// ErrConflict; the caller then reopens the cursor exactly.
func (t *Store) AppendAt(ctx context.Context, c *Cursor, msgID string, entry []byte) (n uint64, dup bool, err error) {
	if len(entry) == 0 {
		return 0, false, ErrEmptyEntry
	}
	if len(entry) > t.opts.maxEntryBytes {
		return 0, false, fmt.Errorf("%w: entry is %d bytes, limit %d", ErrEntryTooLarge, len(entry), t.opts.maxEntryBytes)
	}
	ctx, cancel, p, err := t.begin(ctx, c.encKey)
	if err != nil {
		return 0, false, err
	}
	defer cancel()
	defer t.putPipe(p)
	n = c.Len()
	m := buildEntryMsgs(t.names.Transcript(c.encKey), n, c.lastSeq(), [][]byte{entry}, nil)[0]
	if msgID != "" {
		m.Header[nats.MsgIdHdr] = []string{msgID}
	}
	if v := c.unindexedHeader(); v != "" {
		m.Header[hdrUnindexed] = []string{v}
	}
	res, err := p.roundTrip(ctx, []*nats.Msg{m})
	if err != nil {
		return 0, false, err
	}
	ack, err := parseAck(res[0])
	if bus.IsWrongLastSeq(err) {
		return 0, false, fmt.Errorf("%w: %s changed under its cursor: %v", ErrConflict, c.encKey, err)
	}
	if err != nil {
		return 0, false, err
	}
	if ack.Dup {
		return n, true, nil
	}
	c.seqs = append(c.seqs, ack.Seq)
	c.last = entry
	return n, false, nil
}

// Flush moves the index past the entries appended through the cursor.
func (t *Store) Flush(ctx context.Context, c *Cursor) error {
	if len(c.seqs) == 0 {
		return nil
	}
	ctx, cancel, p, err := t.begin(ctx, c.encKey)
	if err != nil {
		return err
	}
	defer cancel()
	defer t.putPipe(p)
	nh, err := t.indexAppend(ctx, p, c.encKey, c.h, c.top, c.seqs)
	if err != nil {
		return fmt.Errorf("index %s: %w", c.encKey, err)
	}
	c.h, c.top, c.seqs = nh, &rawEntry{n: nh.Count - 1, seq: nh.Last, data: c.last}, nil
	return nil
}
