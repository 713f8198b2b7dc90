package gateway

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The waiting line of a session. A run that finds its session busy is
// nak'd and tries again later (laneRetryDelay), its delay growing with its
// deliveries: left at that, a run queued later, polling at its first short
// delays, takes the session before an older one that polls every 500 ms,
// and three follow-ups of one chat run out of order. So a run that finds
// the session busy joins the session entry's line (RareFields.Waiting), in
// the order of its request's SB_RUNS sequence, and a run that finds the
// session free still waits while a run ahead of it in the line has not
// ended. The line costs nothing to a session nobody waits for: the claim
// reads the session entry anyway, and reads the records of the runs ahead
// only when there are some. A run leaves the line with the write that
// ends its turn (touchSession); one that ended without it (killed while
// waiting) is passed over, and dropped by the next run's write.

// seq is the SB_RUNS stream sequence of the run's request: its place in
// the queue (0: unknown, which waits for nobody and lines up last).
func (r *run) seq() uint64 {
	if md, err := r.msg.Metadata(); err == nil {
		return md.Sequence.Stream
	}
	return 0
}

// aheadInLine returns errBusy when a run queued before this one is in the
// session's line and has not ended. The runs it finds ended are kept in
// r.gone for the run's last write to drop.
func (r *run) aheadInLine(ctx context.Context) error {
	if r.sess == nil {
		return nil
	}
	line, mine := r.sess.Rares().Waiting, r.seq()
	var ahead []string
	for _, w := range line {
		if w.Run != r.req.RunID && (mine == 0 || w.Seq < mine) {
			ahead = append(ahead, w.Run)
		}
	}
	if len(ahead) == 0 {
		return nil
	}
	waits := make([]bool, len(ahead))
	errs := make([]error, len(ahead))
	var wg sync.WaitGroup
	for i, id := range ahead {
		wg.Go(func() {
			rec, _, err := r.g.runs.Get(ctx, id)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
			case err != nil:
				errs[i] = err
			default:
				waits[i] = !rec.Terminal()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, w := range waits {
		if w {
			return errBusy
		}
		r.gone = append(r.gone, ahead[i])
	}
	return nil
}

// joinLine puts the run in its session's line when it is not there yet
// (one write per waiting run, not per retry). A failure only leaves the
// run out of the line: it still waits, as before there was one.
func (r *run) joinLine(ctx context.Context) {
	if r.sess == nil || slices.ContainsFunc(r.sess.Rares().Waiting, func(w sessions.WaitingRun) bool { return w.Run == r.req.RunID }) {
		return
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	me := sessions.WaitingRun{Run: r.req.RunID, Seq: r.seq()}
	_, _, err := r.g.store.UpdateFrom(octx, r.req.SessionKey, r.sess, r.sessRev, func(e *sessions.Entry) error {
		line := e.Rares().Waiting
		if slices.ContainsFunc(line, func(w sessions.WaitingRun) bool { return w.Run == me.Run }) {
			return record.ErrUnchanged
		}
		line = slices.Clone(line)
		at, _ := slices.BinarySearchFunc(line, me, func(a, b sessions.WaitingRun) int {
			if b.Seq == 0 {
				return -1 // an unknown place lines up last
			}
			switch {
			case a.Seq == 0 || a.Seq > b.Seq:
				return 1
			case a.Seq < b.Seq:
				return -1
			}
			return 0
		})
		line = slices.Insert(line, at, me)
		e.SetRare(func(rf *sessions.RareFields) { rf.Waiting = line })
		return nil
	})
	if err != nil && !errors.Is(err, sessions.ErrNotFound) {
		r.g.log.Debug("gateway: joining the session's waiting line", "run", r.req.RunID, "err", err)
	}
}

// leaveLine drops the run and the ended runs it passed over from the
// line in e; it reports whether it changed anything.
func leaveLine(e *sessions.Entry, runID string, gone []string) bool {
	line := e.Rares().Waiting
	if len(line) == 0 {
		return false
	}
	kept := slices.DeleteFunc(slices.Clone(line), func(w sessions.WaitingRun) bool {
		return w.Run == runID || slices.Contains(gone, w.Run)
	})
	if len(kept) == len(line) {
		return false
	}
	if len(kept) == 0 {
		kept = nil
	}
	e.SetRare(func(rf *sessions.RareFields) { rf.Waiting = kept })
	return true
}
