package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// The queue modes (OpenClaw's messages.queue, docs/inbound.md#queue): what
// a human message does while its session runs a turn, whichever worker
// takes it and whichever gateway runs the turn. The worker finds the
// running turn as /stop does (the transcript's newest entry names it) and:
//
//   - steer, queue, steer-backlog: appends the message to the running
//     run's record (its inbox) with a compare-and-set that holds only while
//     the run runs; the gateway reads it at the turn's next boundary
//     (gateway/steer.go). A run that ended first, a turn that cannot be
//     steered (exec or script agents, a compaction) or a full inbox: the
//     message waits for a turn of its own, as OpenClaw falls back.
//   - followup: a turn of its own, queued behind the running one.
//   - collect: joins the session's collect run, one per running turn
//     (its id derived from the running run's), whose prompt is the batch;
//     it starts after the running turn, once its quiet window is over.
//   - interrupt: stops the running turn (as /stop) and queues the message.
//
// A session that runs nothing runs the message at once in every mode.

// maxInboxBytes bounds the text steered into one run's record: well
// under a record's 1 MiB, whatever the cap.
const maxInboxBytes = 256 << 10

// queueOf is the queue of a message of channel into the session e.
func (d *Deps) queueOf(e *sessions.Entry, channel string) config.QueueSettings {
	var o config.QueueOverride
	if e != nil {
		r := e.Rares()
		o = config.QueueOverride{Mode: r.QueueMode, DebounceMs: r.QueueDebounceMs, Cap: r.QueueCap, Drop: r.QueueDrop}
	}
	return d.Config.QueueFor(channel, o)
}

// activeTurn is the run whose turn holds session key now, with the part
// of it the transcript ends with (nil: none runs).
func (d *Deps) activeTurn(ctx context.Context, key string) (*runs.Record, string, error) {
	cur, err := d.Transcripts.OpenCursor(ctx, bus.EncodeKey(key), true)
	if err != nil {
		return nil, "", fmt.Errorf("read the end of %s's transcript: %w", key, err)
	}
	top, _ := cur.Top()
	var m struct {
		M *struct {
			Run  string `json:"run"`
			Part string `json:"part"`
		} `json:"__sessionbus"`
	}
	if len(top) == 0 || json.Unmarshal(top, &m) != nil || m.M == nil || m.M.Run == "" || m.M.Part == "reply" {
		return nil, "", nil
	}
	rec, _, err := d.Runs.Get(ctx, m.M.Run)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read the running run of %s: %w", key, err)
	}
	if rec.Terminal() {
		return nil, "", nil
	}
	return rec, m.M.Part, nil
}

// steerable reports whether the active turn takes steered messages: a
// turn (not a compaction) of an agent whose runtime asks the model again.
func (d *Deps) steerable(active *runs.Record, part string) bool {
	return active != nil && active.Status == runs.Running &&
		(part == "prompt" || strings.HasPrefix(part, "steer.")) && d.Config.Steerable(active.AgentID)
}

// steerInto appends m to the running run's inbox; false when the run no
// longer runs or its inbox is full (the message then waits for a turn of
// its own). A message already there (a retried request) counts as taken.
func (d *Deps) steerInto(ctx context.Context, runID string, m runs.InboxMessage, capacity int) (bool, error) {
	took := false
	_, err := d.Runs.Update(ctx, runID, func(r *runs.Record) error {
		took = slices.ContainsFunc(r.Inbox, func(x runs.InboxMessage) bool { return x.ID == m.ID })
		if took || r.Status != runs.Running {
			return record.ErrUnchanged
		}
		n, size := 0, len(m.Text)
		for _, x := range r.Inbox {
			if x.Mode != config.QueueCollect {
				n++
			}
			size += len(x.Text)
		}
		if n >= capacity || size > maxInboxBytes {
			return record.ErrUnchanged
		}
		r.Inbox = append(slices.Clone(r.Inbox), m)
		took = true
		return nil
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("steer into run %s: %w", runID, err)
	}
	return took, nil
}

// inboxMessage is the human message of req as an inbox entry, carrying
// req as its follow-up.
func inboxMessage(req *runqueue.Request, mode string) runs.InboxMessage {
	follow, _ := bus.Marshal(req)
	return runs.InboxMessage{ID: req.RunID, Text: req.Message, At: req.CreatedAt, Mode: mode, Followup: follow}
}

// queueInbound applies the session's queue mode to a human message whose
// run req (record rec) is about to be queued. handled is false when the
// message runs as its own turn now (the caller queues req); otherwise out
// is the answer.
func (d *Deps) queueInbound(ctx context.Context, ip inboundParams, e *sessions.Entry, req *runqueue.Request, rec *runs.Record) (out *inboundResult, handled bool, err error) {
	s := d.queueOf(e, ip.channel)
	if s.Mode == config.QueueFollowup {
		return nil, false, nil // behind the running turn, if any: the plain path
	}
	active, part, err := d.activeTurn(ctx, ip.sessionKey)
	if err != nil || active == nil {
		return nil, false, err
	}
	switch s.Mode {
	case config.QueueSteer, config.QueueQueue, config.QueueSteerBacklog:
		if !d.steerable(active, part) {
			return nil, false, nil // OpenClaw's fallback: a turn after this one
		}
		took, err := d.steerInto(ctx, active.RunID, inboxMessage(req, s.Mode), s.Cap)
		if err != nil || !took {
			return nil, false, err
		}
		return d.answerQueued(ctx, ip, "steered", active.RunID)
	case config.QueueCollect:
		return d.collectInbound(ctx, ip, req, rec, active, s)
	case config.QueueInterrupt:
		if _, err := d.StopSession(ctx, ip.sessionKey); err != nil {
			return nil, false, err
		}
		return nil, false, nil // the newest message runs once the stopped turn ends
	}
	return nil, false, nil
}

// answerQueued is the ingress's answer to a message a queue took
// (status "steered", "collected" or "dropped"); with wait, the outcome
// of the run that took it, as sessions_send reports one.
func (d *Deps) answerQueued(ctx context.Context, ip inboundParams, status, runID string) (*inboundResult, bool, error) {
	out := &inboundResult{Status: status, RunID: runID, SessionKey: ip.sessionKey}
	if ip.timeoutSeconds == 0 || status == "dropped" {
		return out, true, nil
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(ip.timeoutSeconds)*time.Second)
	defer cancel()
	last, err := d.Runs.Wait(wctx, runID)
	switch {
	case err != nil && wctx.Err() != nil: // still running: the reply will be delivered
	case err != nil:
		out.Status, out.Error = "error", err.Error()
	case last.Status == runs.OK:
		out.Status, out.Reply = "ok", last.Reply
	case last.Status == runs.Timeout:
		out.Status, out.Error = "timeout", rules.FirstNonEmpty(last.Error, errSendRunTimeout)
	default:
		out.Status, out.Error = "error", rules.FirstNonEmpty(last.Error, errSendAgentError)
	}
	return out, true, nil
}

// collectInbound adds the message to the collect run that follows the
// active one, creating and queueing that run for the first message.
func (d *Deps) collectInbound(ctx context.Context, ip inboundParams, req *runqueue.Request, rec *runs.Record, active *runs.Record, s config.QueueSettings) (*inboundResult, bool, error) {
	m := inboxMessage(req, config.QueueCollect)
	m.Followup = nil // a batch runs as one turn, never message by message
	for range 3 {
		cid := bus.DerivedUUID("sessionbus/collect", ip.sessionKey, active.RunID)
		state, err := d.addToBatch(ctx, cid, m, s)
		if err != nil {
			return nil, false, err
		}
		switch state {
		case batchAdded:
			return d.answerQueued(ctx, ip, "collected", cid)
		case batchDropped:
			return d.answerQueued(ctx, ip, "dropped", cid)
		case batchMissing:
			crec := &runs.Record{RunID: cid, SessionKey: ip.sessionKey, AgentID: req.AgentID, Status: runs.Pending,
				CreatedAt: req.CreatedAt, ChainID: cid, Collect: true, QuietMs: s.DebounceMs, Inbox: []runs.InboxMessage{m}}
			err := d.Runs.Create(ctx, crec)
			if errors.Is(err, runs.ErrExists) {
				continue // another worker made it meanwhile: join it
			}
			if err != nil {
				return nil, false, fmt.Errorf("record the collect run of %s: %w", ip.sessionKey, err)
			}
			creq := &runqueue.Request{RunID: cid, SessionKey: ip.sessionKey, AgentID: req.AgentID,
				Provenance: req.Provenance, Lane: req.Lane, ChainID: cid, CreatedAt: req.CreatedAt,
				ReplyTo: req.ReplyTo, Recorded: true}
			if err := d.Queue.Publish(ctx, creq); err != nil {
				d.markUnqueued(ctx, cid, err)
				return nil, false, fmt.Errorf("queue the collect run of %s: %w", ip.sessionKey, err)
			}
			return d.answerQueued(ctx, ip, "collected", cid)
		}
		// the batch started: the session now runs it, or a later turn
		if active, _, err = d.activeTurn(ctx, ip.sessionKey); err != nil || active == nil {
			return nil, false, err
		}
	}
	return nil, false, nil // the session kept moving on: a turn of its own
}

type batchState int

const (
	batchAdded batchState = iota
	batchDropped
	batchMissing
	batchStarted
)

// addToBatch adds m to the waiting collect run cid, applying the
// queue's cap and drop policy.
func (d *Deps) addToBatch(ctx context.Context, cid string, m runs.InboxMessage, s config.QueueSettings) (batchState, error) {
	state := batchAdded
	_, err := d.Runs.Update(ctx, cid, func(r *runs.Record) error {
		state = batchAdded
		if slices.ContainsFunc(r.Inbox, func(x runs.InboxMessage) bool { return x.ID == m.ID }) {
			return record.ErrUnchanged
		}
		if r.Status != runs.Pending {
			state = batchStarted
			return record.ErrUnchanged
		}
		inbox := slices.Clone(r.Inbox)
		size := len(m.Text)
		for _, x := range inbox {
			size += len(x.Text)
		}
		for len(inbox) > 0 && (len(inbox) >= s.Cap || size > maxInboxBytes) {
			if s.Drop == config.DropNew {
				state = batchDropped
				return record.ErrUnchanged
			}
			old := inbox[0]
			inbox, size = inbox[1:], size-len(old.Text)
			if s.Drop == config.DropSummarize {
				r.InboxDropped++
				r.InboxSummary = append(slices.Clone(r.InboxSummary), summaryLine(old.Text))
			}
		}
		r.Inbox = append(inbox, m)
		return nil
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return batchMissing, nil
	}
	if err != nil {
		return 0, fmt.Errorf("add to collect run %s: %w", cid, err)
	}
	return state, nil
}

// summaryLine is a dropped message as one short line of the overflow
// summary.
func summaryLine(text string) string {
	line := strings.Join(strings.Fields(text), " ")
	if r := []rune(line); len(r) > 160 {
		line = string(r[:159]) + "…"
	}
	return line
}

// markUnqueued ends a run record whose request never reached the queue.
func (d *Deps) markUnqueued(ctx context.Context, runID string, cause error) {
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = d.Runs.Update(mctx, runID, func(r *runs.Record) error {
		if r.Status != runs.Pending {
			return record.ErrUnchanged
		}
		r.Status, r.Error, r.EndedAt = runs.Error, "the run was never queued: "+cause.Error(), time.Now().UnixMilli()
		return nil
	})
}
