package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// One run at a time holds a session, and the transcript says which, with
// no write of its own: every entry a run appends carries its marker
// (parts.go), and a run appends its first entry (a turn's prompt, an
// on-demand compaction's entry) with a compare-and-set on the transcript's
// newest entry only when that entry is not an open part of another run. A
// part is open while its run's record is not terminal, unless it is the
// run's reply, which closes the turn; a turn that ends without one (killed,
// timed out, failed, yielded) is closed by its terminal record. Entries
// without a marker (an import) hold nothing.
//
// Two runs that both find the end free both send their running record and
// their prompt; one compare-and-set wins. The loser re-reads the end, finds
// the winner's open prompt, puts its record back to pending and is retried
// after laneRetryDelay, as a run that found the session busy at its claim
// is. A run whose gateway died keeps the session until its redelivery
// resumes it, a kill or a sweep's timeout makes its record terminal, or
// its turn's deadline is long past (stillHolds).

// errBusy says another run holds the session: the delivery tries again
// after laneRetryDelay, and it never counts as a failure.
var errBusy = errors.New("the session is busy with another run")

// errEnded says the run was ended from outside (a kill, a sweep's timeout)
// and another run holds the session since: the turn's late parts are
// dropped, and its record keeps what ended it.
var errEnded = errors.New("the run was ended and another run holds its session")

// partHolder is the run an entry may hold its session for
// (transcripts.PartHolder).
func partHolder(data []byte) string { return transcripts.PartHolder(data) }

// otherHolder is the run other than r that the cursor's newest entry may
// hold the session for ("" for none); known is false when the cursor does
// not know that entry.
func (r *run) otherHolder() (id string, known bool) {
	data, known := r.cur.Top()
	if !known {
		return "", false
	}
	if id = partHolder(data); id == r.req.RunID {
		id = ""
	}
	return id, true
}

// endHolder is otherHolder, reading the newest entry when the cursor does
// not know it (one read).
func (r *run) endHolder(ctx context.Context) (string, error) {
	if id, known := r.otherHolder(); known {
		return id, nil
	}
	n := r.cur.Len()
	es, err := r.g.tr.Read(ctx, r.enc, n-1, n)
	if err != nil {
		return "", fmt.Errorf("read the transcript's newest entry: %w", err)
	}
	if len(es) == 0 {
		return "", nil
	}
	if id := partHolder(es[len(es)-1].Data); id != r.req.RunID {
		return id, nil
	}
	return "", nil
}

// stillHolds reports whether run id, named by the transcript's newest
// entry, still holds the session: its record is not terminal. A record
// that is gone (expired, long after any turn) holds nothing, and neither
// does a running one past its turn's deadline by two ack waits: its
// gateway died and its request is gone (a redelivery would have recorded
// a new attempt by then), and nothing else would ever end it.
func (g *Gateway) stillHolds(ctx context.Context, id string) (bool, error) {
	rec, _, err := g.runs.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the record of run %s, which holds the session: %w", id, err)
	}
	if rec.Status == runs.Running && rec.TurnDeadline > 0 &&
		time.Now().UnixMilli() > rec.TurnDeadline+2*g.ackWait.Milliseconds() {
		g.log.Warn("gateway: a run past its turn's deadline held a session; taking it", "run", id, "session", rec.SessionKey)
		return false, nil
	}
	return !rec.Terminal(), nil
}

// turnTimeout is the most a turn of req may run (runAgent stops it then;
// a sub-agent's deadline can only make it shorter).
func (g *Gateway) turnTimeout(req *runqueue.Request) time.Duration {
	secs := req.TimeoutSeconds
	if secs <= 0 {
		secs = DefaultTimeoutSeconds
	}
	return time.Duration(secs) * time.Second
}

// heldByOther returns errBusy when another run holds the session at the
// cursor's end.
func (r *run) heldByOther(ctx context.Context) error {
	id, err := r.endHolder(ctx)
	if err != nil || id == "" {
		return err
	}
	busy, err := r.g.stillHolds(ctx, id)
	if err == nil && busy {
		err = errBusy
	}
	return err
}

// mayAppendAfter decides, after a part's compare-and-set found the end
// moved and the cursor was read again, whether the part goes at the new
// end. It does unless another run holds the session there: then the run's
// first part backs off (errBusy); a later part means this run was ended
// from outside while another started (errEnded), or an entry without a
// marker covered this run's prompt and let the other in, and then both
// write, as two writers do around an import.
func (r *run) mayAppendAfter(ctx context.Context) error {
	err := r.heldByOther(ctx)
	if !errors.Is(err, errBusy) || !r.holds {
		return err
	}
	own, _, err := r.g.runs.Get(ctx, r.req.RunID)
	if err != nil {
		return fmt.Errorf("read the run's record: %w", err)
	}
	if own.Terminal() {
		return errEnded
	}
	return nil
}

// backOff puts the run's record back to pending after its prompt lost the
// session to another run's: its running record went out beside the
// prompt, and session_status, kill and the sweep must see a run that waits,
// not one that runs. A record that turned terminal meanwhile (a kill) is
// kept.
func (r *run) backOff(ctx context.Context) error {
	rec, rev, err := r.g.runs.UpdateFrom(ctx, r.req.RunID, r.rec, r.rev, func(rr *runs.Record) error {
		if rr.Terminal() || rr.Status == runs.Pending {
			return record.ErrUnchanged
		}
		rr.Status, rr.Gateway, rr.StartedAt, rr.TurnDeadline, rr.TranscriptAt = runs.Pending, "", 0, 0, nil
		rr.Attempts = max(rr.Attempts-1, 0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the run waiting again: %w", err)
	}
	r.rec, r.rev = rec, rev
	return nil
}

// laneRetryDelay backs off with the number of deliveries: a queued request
// polls its busy session quickly at first, then at most every 500 ms. Which
// waiting run goes first is not left to these delays: the session's
// waiting line keeps them in queue order (line.go).
func laneRetryDelay(msg jetstream.Msg) time.Duration {
	n := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		n = md.NumDelivered
	}
	d := 10 * time.Millisecond << min(n-1, 6)
	return min(d, 500*time.Millisecond)
}

// startHeartbeat keeps the run's message ours while the turn runs.
func (r *run) startHeartbeat(ctx context.Context) {
	hbCtx, stop := context.WithCancel(ctx)
	r.hbStop = stop
	r.hbWG.Go(func() {
		t := time.NewTicker(r.g.heartbeat())
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				_ = r.msg.InProgress()
			}
		}
	})
}

// stopHeartbeat stops the heartbeat; safe to call twice.
func (r *run) stopHeartbeat() {
	if r.hbStop != nil {
		r.hbStop()
		r.hbWG.Wait()
		r.hbStop = nil
	}
}
