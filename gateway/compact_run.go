package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// compactRun is an on-demand compaction (`sessionbus session compact`):
// it compacts whether or not the context fits, and records the outcome as
// the run's: ok with a one-line report as its reply, or an error saying why
// nothing was compacted. Its compaction entry carries the run's marker and
// is its first part, so it obeys the rule a turn's prompt does (lane.go):
// it is appended only where no other run's turn is open, never inside
// one, and holds the session until the run's record is terminal. A turn
// that started while the summary was written finds the entry going after
// its reply; one still open then makes the compaction back off (errBusy)
// and run again. A redelivered run that finds its compaction entry reports
// it without compacting again.
func (r *run) compactRun(ctx context.Context) (*runs.Record, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	at := r.cur.Len()
	if r.rec.TranscriptAt != nil {
		at = *r.rec.TranscriptAt
	}
	var mine []transcripts.Entry
	if r.rec.TranscriptAt != nil {
		var err error
		if mine, err = r.g.tr.Read(octx, r.enc, at, at+1); err != nil {
			return nil, fmt.Errorf("read transcript: %w", err)
		}
	}
	awaitRec, err := r.recordRunning(octx, at)
	if err != nil {
		return nil, err
	}
	already, err := awaitRec()
	if err != nil || already != nil {
		return already, err
	}
	cancel()
	r.earlierCompaction(ctx, mine)
	status, errText, reply := runs.OK, "", ""
	if r.compacted == nil {
		tc, err := r.loadContext(ctx)
		if err != nil {
			return nil, err
		}
		out, err := r.compact(ctx, tc, compactOptions{instructions: r.req.Compact.Instructions})
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, errBusy):
			// another run's turn is open at the end: compact again after it
			bctx, c := opCtx(ctx)
			defer c()
			if berr := r.backOff(bctx); berr != nil {
				return nil, berr
			}
			return nil, err
		case err != nil:
			status, errText = runs.Error, err.Error()
		default:
			r.tc = out
			reply = fmt.Sprintf("Compacted: %d → %d tokens (estimated); the context now starts at entry %d; compactions: %d",
				tc.used, out.used, out.start, r.compacted.CompactionCount)
		}
	}
	if status == runs.OK && reply == "" {
		reply = fmt.Sprintf("Compacted: the context starts at entry %d; compactions: %d", r.compacted.FirstKeptEntry, r.compacted.CompactionCount)
	}
	octx, cancel = opCtx(ctx)
	defer cancel()
	if r.compacted != nil {
		// the count lands before the outcome, which the op's caller waits
		// for and then reads the count
		tu := &turnUsage{compacted: r.compacted}
		if r.tc != nil {
			tu.window, tu.contextUsed = r.tc.limits.ContextWindow, r.tc.used
		}
		r.g.touchSession(octx, r.req, r.sess, r.sessRev, tu, "", r.gone)
	}
	return r.recordOutcome(octx, status, errText, reply, nil, time.Now().UnixMilli())
}
