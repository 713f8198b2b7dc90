package submit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// Starter starts the runs callers wait on (sessions_send, the ingress):
// the one owner of "queue a run and wait for it", over Run.
type Starter struct {
	Queue *runqueue.Queue
	Runs  *runs.Records
	Log   *slog.Logger
}

// Queued is a run request a tool (sessions_send) or the ingress has put
// on SB_RUNS, and the means to wait for its outcome.
type Queued struct {
	s      *Starter
	who    string // for log lines: the tool or endpoint that queued it
	rec    *runs.Record
	waiter *runs.Waiter
	// Repeat is set when the request's idempotency key was seen before:
	// no second run was started, the first one's outcome is waited on.
	Repeat bool
}

// Start queues req with its record rec, never twice for one
// idempotency key (rec.IdempotencyKey, whose run id is derived from it).
//
// A fresh run the caller waits for (wait, no idempotency key) is watched
// before it is queued, so its outcome needs no read, and it is queued
// without a pending record (the gateway records it running; see
// runqueue.Request.Recorded). An idempotent one may have finished long
// ago: it is recorded first and read by Runs.Wait. A repeat (the record
// exists) starts nothing; if the first call recorded the run but its
// publish may not have landed, it is published again inside the dedupe
// window, where SB_RUNS drops a duplicate by message id.
//
// The error, if any, is the reason the run could not be queued. Stop the
// returned run when done with it.
func (s *Starter) Start(ctx context.Context, who string, req *runqueue.Request, rec *runs.Record, wait bool) (*Queued, error) {
	q := &Queued{s: s, who: who, rec: rec}
	idempotent := rec.IdempotencyKey != ""
	if wait && !idempotent {
		w, err := s.Runs.Watch(req.RunID)
		if err != nil {
			return nil, err
		}
		q.waiter = w
		if err := s.Queue.Publish(ctx, req); err != nil {
			q.Stop()
			return nil, err
		}
		return q, nil
	}
	err := Run(ctx, s.Queue, s.Runs, req, rec)
	if err == nil {
		return q, nil
	}
	if !errors.Is(err, runs.ErrExists) || !idempotent {
		return nil, err
	}
	q.Repeat = true
	first, _, err := s.Runs.Get(ctx, req.RunID)
	if err != nil {
		return nil, err
	}
	if first.Status == runs.Pending && time.Duration(rec.CreatedAt-first.CreatedAt)*time.Millisecond < runqueue.DedupeWindow-time.Minute {
		req.ChainID, req.Hop, req.CreatedAt = first.ChainID, first.Hop, first.CreatedAt
		if perr := s.Queue.Publish(ctx, req); perr != nil {
			s.log().Warn(who+": re-publish of idempotent run", "runId", req.RunID, "err", perr)
		}
	}
	return q, nil
}

// Wait waits up to timeout for the run's outcome. It returns the terminal
// record; (nil, nil) when the wait ended first — the caller's soft timeout,
// or a wait the worker's shutdown cut short: the run goes on, and a run no
// gateway took yet gets its pending record now; or an error when the
// outcome could not be read.
func (q *Queued) Wait(ctx context.Context, timeout time.Duration) (*runs.Record, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *runs.Record
	var err error
	if q.waiter != nil {
		last, err = q.waiter.Wait(wctx)
	} else {
		last, err = q.s.Runs.Wait(wctx, q.rec.RunID)
	}
	if err == nil || (last != nil && last.Terminal()) {
		return last, nil
	}
	if !errors.Is(err, context.DeadlineExceeded) && !bus.Stopping(wctx) {
		return nil, err
	}
	if last == nil && q.waiter != nil {
		pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		perr := q.s.Runs.RecordPending(pctx, q.rec)
		pcancel()
		if perr != nil {
			q.s.log().Warn(q.who+": record pending run", "runId", q.rec.RunID, "err", perr)
		}
	}
	return nil, nil
}

// Stop ends the watch of a run queued for waiting; safe on any run.
func (q *Queued) Stop() {
	if q != nil && q.waiter != nil {
		q.waiter.Stop()
		q.waiter = nil
	}
}

func (s *Starter) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}
