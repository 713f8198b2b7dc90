// Package submit starts a run: it writes the run's pending record (kv/runs)
// and queues its request on SB_RUNS (streams/runqueue), so a caller can
// wait on the record and a gateway finds it when it takes the run.
package submit

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// Run creates the pending record and queues the request (marked
// Recorded); the publish carries Nats-Msg-Id = run id, so a retried submit
// never queues twice.
//
// A run with an idempotency key is checked first: the record's Create is
// awaited before the publish, and runs.ErrExists means a record with this
// id exists (an idempotent repeat). Any other run id is fresh, so the two
// writes are pipelined, record first on the same connection, in one round
// trip; should the record write fail, the run still goes ahead and the
// gateway that takes it writes the record.
//
// A record whose run could not be queued is never left pending (nothing
// would ever run it): it is marked error with the reason.
func Run(ctx context.Context, q *runqueue.Queue, recs *runs.Records, req *runqueue.Request, rec *runs.Record) error {
	return run(ctx, q, recs, req, rec, true)
}

// Retried is Run for a caller that retries the same request itself until
// it is queued (an announce's delivery): a failed publish leaves the
// record pending instead of marking it never queued. A publish that timed
// out may have landed, and a run marked never queued is never run, so
// marking it would lose a run that was queued after all; the retry's
// publish carries the same message id, which SB_RUNS drops if the first
// one landed.
func Retried(ctx context.Context, q *runqueue.Queue, recs *runs.Records, req *runqueue.Request, rec *runs.Record) error {
	return run(ctx, q, recs, req, rec, false)
}

func run(ctx context.Context, q *runqueue.Queue, recs *runs.Records, req *runqueue.Request, rec *runs.Record, mark bool) error {
	req.Recorded = true
	var created jetstream.PubAckFuture
	if rec.IdempotencyKey != "" {
		if err := recs.Create(ctx, rec); err != nil {
			return err
		}
	} else {
		var err error
		if created, err = recs.CreateAsync(rec); err != nil {
			return err
		}
	}
	err := q.Publish(ctx, req)
	if err != nil && mark && ctx.Err() != nil {
		// the caller's time ran out (while a stream elected a leader, say):
		// the publish may have landed. One more under the same message id,
		// on time of its own, settles it whenever the stream answers in that
		// time (a landed one comes back as a duplicate), so a run that is
		// queued is not marked never queued, which keeps it from running.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastPublishFor)
		err = q.Publish(fctx, req)
		cancel()
	}
	if err != nil {
		if !mark {
			return err
		}
		if created != nil {
			select { // the record must exist before it can be marked
			case <-created.Ok():
			case <-created.Err():
			case <-ctx.Done():
			}
		}
		markUnqueued(ctx, recs, rec.RunID, err)
		return err
	}
	if created != nil {
		select {
		case <-created.Ok():
		case <-created.Err():
		case <-ctx.Done():
		}
	}
	return nil
}

// lastPublishFor bounds the publish that settles one cut short by its
// caller's deadline.
const lastPublishFor = 5 * time.Second

// markUnqueued records that runID's request never reached the queue. It is
// best effort: when the store is down too, the record stays pending until
// the runs bucket's max age removes it.
func markUnqueued(ctx context.Context, recs *runs.Records, runID string, cause error) {
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = recs.Update(mctx, runID, func(r *runs.Record) error {
		if r.Status != runs.Pending {
			return record.ErrUnchanged
		}
		r.Status, r.Error, r.EndedAt = runs.Error, "the run was never queued: "+cause.Error(), time.Now().UnixMilli()
		return nil
	})
}
