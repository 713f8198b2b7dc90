package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// A stop (docs/inbound.md, /stop) reaches the gateway that holds the run
// as its run record turning `aborted`: the worker that took the request
// writes it with a compare-and-set (a run that ended first keeps its
// outcome), and every run's turn watches its own record (run.go), through
// the one bucket-wide watch of the process. No subject of its own: the
// record is the durable signal a redelivered attempt also reads (it finds
// the run terminal and never runs it again), and both sides already have
// the bucket.

// stopReasonAborted is what the transcript's reply of an aborted turn
// carries, as OpenClaw's assistant message of an aborted run does.
const stopReasonAborted = "aborted"

// finishAborted ends a turn whose record was made aborted while it ran:
// the provider's request was cancelled with the turn's context, the text
// the model streamed so far is kept as the reply (marked stopReason
// "aborted"), which frees the session, and the session entry takes
// abortedLastRun. The record stays as the stop wrote it; the message is
// acked, so nothing runs again.
func (r *run) finishAborted(ctx context.Context, ended *runs.Record) (*runs.Record, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	r.live.Fail(ended.Error)
	endedAt := time.Now().UnixMilli()
	partial := r.live.Partial()
	msg := map[string]any{"role": "assistant", "content": partial, "stopReason": stopReasonAborted}
	msg[runMarker] = marker{Run: r.req.RunID, Part: "reply"}
	data, _ := bus.Marshal(msg)
	if err := r.appendPart(octx, "reply", data, nil); err != nil && !errors.Is(err, errEnded) {
		return nil, err
	}
	return r.recordOutcome(octx, runs.Aborted, ended.Error, "", nil, endedAt)
}
