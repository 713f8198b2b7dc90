package search

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// write is the one goroutine that changes the index: it takes the
// messages and session events waiting, at most Batch entries, and
// commits them in one transaction.
func (in *Indexer) write(ctx context.Context) {
	defer in.wg.Done()
	initial := true           // the sessions watch is still delivering what exists
	seen := map[uint64]bool{} // keys the initial watch delivered, by keyMark
	for {
		b := &Batch{Purges: map[string]uint64{}}
		var last uint64 // the newest sequence this batch takes
		// Stream entries wait until the sessions watch's initial values are
		// in: Start returns (and a replica joins the queue group) once they
		// are committed, so that commit never queues behind a load of
		// entries; and what was deleted while no indexer ran leaves before
		// any entry of it is written. The reader's buffer holds the stream
		// meanwhile (4 batches).
		msgs := in.msgs
		if initial {
			msgs = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-in.nothingLeft:
			b.Complete = true
		case rd := <-msgs:
			if in.take(b, rd) {
				last = rd.seq
			}
		case e := <-in.events:
			if err := in.event(ctx, b, e, &initial, seen); err != nil {
				in.fail(err)
				return
			}
		}
		// whatever else is already waiting joins this transaction
		// (session events count too: a watch of a million sessions is
		// applied a Batch at a time, not in one transaction)
	drain:
		for n := 0; n < in.o.Batch; n++ {
			msgs := in.msgs
			if initial {
				msgs = nil
			}
			select {
			case rd := <-msgs:
				if in.take(b, rd) {
					last = rd.seq
				}
			case e := <-in.events:
				if err := in.event(ctx, b, e, &initial, seen); err != nil {
					in.fail(err)
					return
				}
			default:
				break drain
			}
		}
		if last > 0 && !in.complete.Load() && last >= in.target.Load() {
			b.Complete = true
		}
		if in.o.BeforeCommit != nil {
			if err := in.o.BeforeCommit(len(b.Rows)); err != nil {
				in.fail(err)
				return
			}
		}
		if err := in.ix.Apply(ctx, b); err != nil {
			if ctx.Err() == nil {
				in.fail(fmt.Errorf("write the search index: %w", err))
			}
			return
		}
		in.committed(b)
	}
}

// committed publishes what a batch changed, once it is on disk.
func (in *Indexer) committed(b *Batch) {
	for k, below := range b.Purges {
		if below > in.floors[k] {
			in.floors[k] = below
		}
	}
	if b.Applied > 0 {
		in.applied.Store(b.Applied)
	}
	in.entries.Add(int64(len(b.Rows)))
	if in.o.Observe != nil {
		now := time.Now()
		for _, r := range b.Rows {
			in.o.Observe(now.Sub(r.stored))
		}
	}
	if b.watched && !in.watched.Load() {
		in.watched.Store(true)
		close(in.watchedCh)
	}
	if b.Complete && !in.complete.Load() {
		in.complete.Store(true)
		in.log.Info("search: index complete", "applied", in.applied.Load())
	}
}

// take adds one stream message to b; it reports whether it was new.
func (in *Indexer) take(b *Batch, rd read) bool {
	if rd.seq <= in.applied.Load() || rd.seq <= b.Applied {
		return false // already applied: a redelivery after a reconnect
	}
	in.seeLast(rd.seq + rd.pending)
	// a floor: the key's transcript was purged above this entry
	if k := rd.row.Key; rd.ok && rd.seq >= in.floors[k] && rd.seq >= b.Purges[k] {
		b.Rows = append(b.Rows, rd.row)
	}
	b.Applied = rd.seq
	return true
}

// event applies one change of the sessions bucket: a key's facts, and
// the end of what a deleted or reset session held.
func (in *Indexer) event(ctx context.Context, b *Batch, e jetstream.KeyValueEntry, initial *bool, seen map[uint64]bool) error {
	if e == nil { // the initial values are all in
		*initial = false
		b.watched = true
		// the marks keep no keys: the file has those of the sessions
		// it held at start, which are the only ones the watch may not
		// have delivered
		var deleted []string // while no indexer ran
		err := in.ix.EachSession(func(s Session) {
			if h := keyMark(s.Key); !seen[h] {
				if _, had := in.sess[h]; had {
					deleted = append(deleted, s.Key)
				}
			}
		})
		if err != nil {
			return err
		}
		for _, k := range deleted {
			if err := in.gone(ctx, b, k, true); err != nil {
				return err
			}
		}
		clear(seen)
		return nil
	}
	key, err := bus.DecodeKey(e.Key())
	if err != nil {
		return nil // not a session key
	}
	if e.Operation() != jetstream.KeyValuePut {
		return in.gone(ctx, b, key, true)
	}
	h := keyMark(key)
	if *initial {
		seen[h] = true
	}
	var ent sessions.Entry
	if err := ent.UnmarshalJSON(e.Value()); err != nil {
		in.log.Warn("search: unreadable session entry; its filters stay as they were", "key", key, "err", err)
		return nil
	}
	s := Session{Key: key, SessionID: ent.SessionID, Channel: handlers.SessionChannel(&ent), Kind: rules.Kind(key, in.o.Alias, ent.ChatType)}
	m := markOf(s)
	prev, had := in.sess[h]
	if had && prev == m {
		return nil
	}
	if had && prev.id != 0 && prev.id != m.id {
		// a reset: its old transcript was purged before the new id was set
		if err := in.gone(ctx, b, key, false); err != nil {
			return err
		}
	}
	in.sess[h] = m
	b.Sessions = append(b.Sessions, s)
	return nil
}

// gone removes what key's purged transcript left in the index: its
// entries below the first one still in the stream. Removed, the key's
// facts go too.
func (in *Indexer) gone(ctx context.Context, b *Batch, key string, removed bool) error {
	below, err := in.firstKept(ctx, key)
	if err != nil {
		return err
	}
	if below > b.Purges[key] {
		b.Purges[key] = below
	}
	if removed {
		delete(in.sess, keyMark(key))
		b.Gone = append(b.Gone, key)
	}
	return nil
}

// firstKept is the sequence of key's first entry still in the stream, or
// one past the stream's last when none is: every entry of key below it
// was purged. The last sequence is read first, so an entry appended
// meanwhile is above it and kept.
func (in *Indexer) firstKept(ctx context.Context, key string) (uint64, error) {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := in.stream.Info(c)
	if err != nil {
		return 0, fmt.Errorf("search: read the transcript stream for a deleted session: %w", err)
	}
	m, err := in.stream.GetMsg(c, 1, jetstream.WithGetMsgSubject(in.o.Names.Transcript(bus.EncodeKey(key))))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return info.State.LastSeq + 1, nil
	case err != nil:
		return 0, fmt.Errorf("search: first entry of %s: %w", key, err)
	}
	return m.Sequence, nil
}
