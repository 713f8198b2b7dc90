package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Stopping a session's running turn: `/stop` in a chat, `sessionbus session
// stop KEY`, <prefix>.ops.session.stop. The worker that takes the request
// finds the run that holds the session (its transcript's newest entry
// names it, as the gateways' lane reads it) and makes its record `aborted`
// with a compare-and-set; the gateway running the turn watches that record
// and cancels the turn (gateway/stop.go), wherever the request came in.

// StopReplyText is OpenClaw's answer to /stop, a run stopped or not.
const StopReplyText = "⚙️ Agent was aborted."

// stopRunReason is the error an aborted run's record carries.
const stopRunReason = "aborted: stopped by request (/stop)"

// StopResult is the answer of a stop.
type StopResult struct {
	// Status: "aborted" (this request stopped the run) or "idle" (no turn
	// was running; nothing was written)
	Status     string `json:"status"`
	SessionKey string `json:"sessionKey"`
	RunID      string `json:"runId,omitempty"`
	Text       string `json:"text"`
}

// StopSession aborts the running turn of session key, on whichever gateway
// holds it. A session with no running turn is answered the same text and
// nothing is written. It is what the ops subject and /stop call; the
// console's Stop button may call it directly.
func (d *Deps) StopSession(ctx context.Context, key string) (*StopResult, error) {
	res := &StopResult{Status: "idle", SessionKey: key, Text: StopReplyText}
	if _, _, err := d.Store.Get(ctx, key); err != nil {
		return nil, entryErr(key, err)
	}
	cur, err := d.Transcripts.OpenCursor(ctx, bus.EncodeKey(key), true)
	if err != nil {
		return nil, fmt.Errorf("read the end of %s's transcript: %w", key, err)
	}
	top, _ := cur.Top()
	runID := transcripts.PartHolder(top)
	if runID == "" {
		return res, nil
	}
	now := d.Now().UnixMilli()
	aborted := false
	_, err = d.Runs.Update(ctx, runID, func(r *runs.Record) error {
		if r.Terminal() {
			aborted = false // ended first: it keeps its outcome
			return record.ErrUnchanged
		}
		r.Status, r.Error, r.EndedAt = runs.Aborted, stopRunReason, now
		aborted = true
		return nil
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return res, nil // a record long expired holds nothing
	}
	if err != nil {
		return nil, fmt.Errorf("abort run %s of %s: %w", runID, key, err)
	}
	if !aborted {
		return res, nil
	}
	if d.Revocations != nil {
		// its tokens end now, not when its gateway notices the stop
		if err := d.Revocations.Revoke(ctx, runID, revocations.ReasonKilled); err != nil {
			d.Log.Warn("stopped run's token not revoked: it stays valid until its run stops", "run", runID, "err", err)
		}
	}
	res.Status, res.RunID = "aborted", runID
	return res, nil
}

// isStopCommand reads a message whose whole text is `/stop` (any case).
func isStopCommand(text string) bool {
	return strings.EqualFold(strings.TrimSpace(text), "/stop")
}

// inboundStop answers /stop like /goal: no run, the route as it was, the
// answer in the reply and published to the message's route.
func (d *Deps) inboundStop(ctx context.Context, ip inboundParams) (*inboundResult, error) {
	opID := sessions.NewID()
	if ip.idempotencyKey != "" {
		opID = inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
	}
	res, err := d.StopSession(ctx, ip.sessionKey)
	if err != nil {
		return nil, err
	}
	if err := d.deliverGoalAnswer(ctx, ip, opID, res.Text); err != nil {
		d.Log.Warn("inbound: delivering the /stop answer failed", "session", ip.sessionKey, "err", err)
	}
	return &inboundResult{Status: "ok", RunID: opID, SessionKey: ip.sessionKey, Reply: res.Text}, nil
}
