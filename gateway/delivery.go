package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// handle executes one delivered run request and acks, naks or leaves it.
func (g *Gateway) handle(msg jetstream.Msg) {
	obs, outcome := g.opts.Observer, "ok"
	obs.RunStarted()
	defer func() { obs.RunDone(outcome) }()
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 1 {
		obs.Redelivered()
	}
	var req runqueue.Request
	if err := json.Unmarshal(msg.Data(), &req); err != nil || req.RunID == "" || req.SessionKey == "" {
		outcome = "malformed"
		reason := "malformed run request: not JSON with runId and sessionKey"
		if err != nil {
			reason = "malformed run request: " + err.Error()
		}
		g.log.Error("gateway: dropping a run request that can never run", "subject", msg.Subject(), "reason", reason)
		_ = msg.TermWithReason(reason)
		return
	}
	log := g.log.With("run", req.RunID, "session", req.SessionKey)
	ctx := g.ctx
	if err := g.execute(ctx, msg, &req); err != nil {
		if errors.Is(err, errBusy) {
			outcome = "busy"
			_ = msg.NakWithDelay(busyDelay(err, laneRetryDelay(msg)))
			return
		}
		if ctx.Err() != nil {
			// Stopping: another replica picks it up at once.
			outcome = "stopping"
			_ = msg.Nak()
			return
		}
		outcome = "failed"
		g.failed(msg, &req, err, log)
		return
	}
	if err := msg.Ack(); err != nil {
		log.Debug("gateway: ack", "err", err)
	}
}

// failed retries a run whose attempt failed, later each time, and after
// MaxRunFailures records it failed and terminates its message, so a run
// that can never succeed is not retried forever. The count is this
// gateway's own, kept by stream sequence: the server's MaxDeliver would also
// count the naks of a run waiting for a busy session, and such a run must wait
// as long as the turn ahead of it takes. Another replica that takes the
// message counts afresh, so a run is tried at most MaxRunFailures times per
// gateway.
func (g *Gateway) failed(msg jetstream.Msg, req *runqueue.Request, err error, log *slog.Logger) {
	key := req.RunID
	if md, merr := msg.Metadata(); merr == nil {
		key = strconv.FormatUint(md.Sequence.Stream, 10)
	}
	n, _ := g.failures.take(key)
	n++
	if permanent(err) {
		n = max(n, MaxRunFailures) // trying again would fail the same way
	}
	if n < MaxRunFailures {
		g.failures.put(key, n)
		delay := min(g.retryDelay<<(n-1), MaxRetryDelay)
		log.Warn("gateway: run failed, will retry", "attempt", n, "of", MaxRunFailures, "retryIn", delay, "err", err)
		_ = msg.NakWithDelay(delay)
		return
	}
	reason := fmt.Sprintf("the gateway gave up on this run after %d failed attempts: %v", n, err)
	log.Error("gateway: run failed for good", "attempts", n, "err", err)
	ctx, cancel := opCtx(context.WithoutCancel(g.ctx))
	defer cancel()
	rerr := g.runs.RecordPending(ctx, newRecord(req))
	if rerr == nil {
		_, rerr = g.runs.Update(ctx, req.RunID, func(r *runs.Record) error {
			if r.Terminal() {
				return record.ErrUnchanged
			}
			r.Status, r.Error, r.EndedAt = runs.Error, reason, time.Now().UnixMilli()
			return nil
		})
	}
	if rerr != nil {
		log.Error("gateway: could not record the failed run", "err", rerr)
	}
	_ = msg.TermWithReason(reason)
}

// permanent reports failures that depend on the run alone, never on the
// state of the servers: its prompt or reply is larger than a transcript
// entry or than the server's max_payload.
func permanent(err error) bool {
	return errors.Is(err, transcripts.ErrEntryTooLarge) || errors.Is(err, nats.ErrMaxPayload)
}
