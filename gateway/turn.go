package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// historyLimit is how many of a child's newest transcript entries its
// completion announce searches for the reply it carries.
const historyLimit = 20

// turn records running, appends the prompt (which holds the session for
// the run), runs the agent, appends the reply (which frees it) and records
// the outcome.
func (r *run) turn(ctx context.Context) (*runs.Record, error) {
	if r.req.Compact != nil {
		return r.compactRun(ctx)
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	mine, err := r.readTranscript(octx)
	if err != nil {
		return nil, err
	}
	r.steer = r.newSteering(mine)
	already, err := r.start(octx, mine)
	if err != nil || already != nil {
		return already, err
	}
	cancel()
	r.announceDelivered()

	// A previous attempt that appended its reply but died before recording
	// the outcome already ran the turn: record that reply, never run twice.
	var res *runtime.Result
	var runErr error
	// a new attempt's live output starts at seq 1 (subscribers reset)
	r.live = NewLiveOutput(r.g.nc, r.g.names, r.req.SessionKey, r.req.RunID, r.g.redact, r.g.log)
	prevReply, replied := findPart(mine, r.req.RunID, "reply")
	r.earlierCompaction(ctx, mine)
	if replied {
		res = &runtime.Result{Reply: prevReply}
	} else {
		if err := r.fitContext(ctx); err != nil {
			return nil, err
		}
		if res, runErr = r.invoke(ctx, r.ownHistory(r.tc.history())); ctx.Err() != nil {
			return nil, ctx.Err() // stopping: leave it to another replica
		}
		if e := r.ended.Load(); e != nil && e.Status == runs.Aborted {
			return r.finishAborted(ctx, e)
		}
	}
	return r.finish(ctx, res, replied, runErr)
}

// readTranscript reads what an earlier attempt of the run wrote, which sits
// at its recorded position, and, beside it, the model's context when the
// agent's runtime reads one.
func (r *run) readTranscript(ctx context.Context) (mine []transcripts.Entry, err error) {
	var ctxErr error
	var wg sync.WaitGroup
	if r.g.wantsContext[r.req.AgentID] {
		wg.Go(func() { r.tc, ctxErr = r.loadContext(ctx) })
	}
	if at := r.rec.TranscriptAt; at != nil {
		// its prompt, the messages steered into it, its reply
		if mine, err = r.g.tr.Read(ctx, r.enc, *at, *at+3+uint64(len(r.rec.Inbox))); err != nil {
			err = fmt.Errorf("read transcript: %w", err)
		}
	}
	wg.Wait()
	if err = errors.Join(err, ctxErr); err != nil {
		return nil, err
	}
	return mine, nil
}

// start is wave 2: the running record, which carries the position the
// prompt is written at, goes out first, and the prompt follows without
// waiting for its ack; a session that has no entry yet is created beside
// them. The prompt's compare-and-set on the transcript's end holds the
// session: when it finds another run's open part there instead, the run
// puts its record back to pending and returns errBusy. An earlier
// attempt's prompt (in mine) is not written again; a new one joins the
// context. It returns the record of a run that was killed before it
// started.
func (r *run) start(ctx context.Context, mine []transcripts.Entry) (*runs.Record, error) {
	g, req := r.g, r.req
	var sessErr error
	var sessWG sync.WaitGroup
	if r.sess == nil {
		sessWG.Go(func() { sessErr = g.createSession(ctx, req, r.child) })
	}
	wantPrompt := !hasPart(mine, req.RunID, "prompt")
	r.holds = !wantPrompt
	var prompt []byte
	var told []notices.Body // notices this turn delivers to a sub-agent watcher
	at := r.cur.Len()
	if !wantPrompt {
		at = *r.rec.TranscriptAt
		if r.rec.Collect {
			req.Prompt, _ = findPart(mine, req.RunID, "prompt")
			req.Message = req.Prompt
		}
	}
	if wantPrompt && !r.rec.Collect {
		prompt, told = r.promptEntry(ctx)
		r.tc.add(transcripts.Entry{N: at, Data: prompt})
	}
	awaitRec, err := r.recordRunning(ctx, at)
	if err != nil {
		sessWG.Wait()
		return nil, err
	}
	if wantPrompt && r.rec.Collect {
		// the batch is the record's as it turns running: no worker adds
		// to it after that write (a wave more, for collect runs only)
		if already, err := awaitRec(); err != nil || already != nil {
			sessWG.Wait()
			return already, err
		}
		req.Prompt = collectPrompt(r.rec)
		req.Message = req.Prompt
		prompt, told = r.promptEntry(ctx)
		r.tc.add(transcripts.Entry{N: at, Data: prompt})
	}
	landed := at // where the prompt goes
	if wantPrompt {
		err = r.appendPart(ctx, "prompt", prompt, func(ctx context.Context, moved uint64) error {
			// the end moved, and no other run holds it: record the new
			// position before writing there
			landed = moved
			if _, err := awaitRec(); err != nil {
				return err
			}
			rec, rev, err := g.runs.UpdateFrom(ctx, req.RunID, r.rec, r.rev, func(rr *runs.Record) error {
				rr.TranscriptAt = &moved
				return nil
			})
			if err != nil {
				return fmt.Errorf("record transcript position: %w", err)
			}
			r.rec, r.rev = rec, rev
			return nil
		})
	}
	already, recErr := awaitRec()
	if errors.Is(err, errBusy) && recErr == nil && already == nil {
		// another run's prompt won the end: wait as a pending run (a write
		// only when two runs of the session start at once)
		recErr = r.backOff(ctx)
	}
	err = errors.Join(recErr, err)
	sessWG.Wait()
	if already != nil {
		if wantPrompt && err == nil && already.TranscriptAt == nil {
			r.promptOfEndedRun(ctx, landed)
		}
		return already, nil
	}
	if err = errors.Join(err, sessErr); err != nil {
		for _, n := range told {
			g.pending.add(n) // not delivered: the next attempt tells them
		}
		return nil, err
	}
	r.ackNotices(ctx, told)
	return nil, nil
}

// promptOfEndedRun records where the prompt of a run ended before it
// started (a stop, a sweep's timeout) landed: the running record and the
// prompt go out together, and the record lost to the ending write while
// the prompt made it in. A record with no transcript position says the
// run never reached the transcript (an announce's carrier is then queued
// again), which would no longer be true.
func (r *run) promptOfEndedRun(ctx context.Context, at uint64) {
	if _, err := r.g.runs.Update(ctx, r.req.RunID, func(rr *runs.Record) error {
		if rr.TranscriptAt != nil {
			return record.ErrUnchanged
		}
		rr.TranscriptAt = &at
		return nil
	}); err != nil {
		r.g.log.Warn("gateway: record where an ended run's prompt landed", "run", r.req.RunID, "err", err)
	}
}

// promptEntry is the prompt as the run's transcript entry. A sub-agent's
// turn also delivers its watcher's pending notices, put before the prompt;
// told lists them.
func (r *run) promptEntry(ctx context.Context) (entry []byte, told []notices.Body) {
	req := r.req
	if r.key.IsSubagent() {
		told = r.g.noticesForTurn(ctx, req.SessionKey)
		req.Prompt = withNotices(req.Prompt, told)
	}
	user := map[string]any{
		"role":    "user",
		"content": req.Prompt,
		runMarker: marker{Run: req.RunID, Part: "prompt"},
	}
	if req.Provenance != nil {
		user["provenance"] = req.Provenance
	}
	entry, _ = bus.Marshal(user)
	return entry, told
}

// recordRunning sends the running record, with the transcript position at,
// without waiting for its ack. await waits for the ack once (later calls
// return at once) and returns the record of a run found terminal, killed
// before it started, which is left as it is.
func (r *run) recordRunning(ctx context.Context, at uint64) (await func() (already *runs.Record, err error), err error) {
	var already *runs.Record
	waitRec, err := r.g.runs.UpdateAsync(ctx, r.req.RunID, r.rec, r.rev, func(rr *runs.Record) error {
		if rr.Terminal() {
			already = rr // killed before it started
			return nil
		}
		rr.Status = runs.Running
		rr.Attempts++
		rr.Gateway = r.g.id
		rr.StartedAt = time.Now().UnixMilli()
		rr.TurnDeadline = rr.StartedAt + r.g.turnTimeout(r.req).Milliseconds()
		rr.Error = ""
		rr.TranscriptAt = &at
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record running: %w", err)
	}
	recorded := false
	return func() (*runs.Record, error) {
		if recorded {
			return already, nil
		}
		recorded = true
		rec, rev, err := waitRec()
		if err != nil {
			return already, fmt.Errorf("record running: %w", err)
		}
		r.rec, r.rev = rec, rev
		return already, nil
	}, nil
}

// ackNotices acknowledges the notices the prompt delivered.
func (r *run) ackNotices(ctx context.Context, told []notices.Body) {
	for _, n := range told {
		if err := r.g.ackNotice(ctx, n); err != nil {
			r.g.log.Warn("gateway: acknowledge a notice (the sweep retries)", "watcher", n.Watcher, "target", n.Target, "err", err)
		}
	}
}

// announceDelivered records, in the background, that the announce the
// request carries is in the requester's transcript now.
func (r *run) announceDelivered() {
	g, req := r.g, r.req
	if req.Announce == nil {
		return
	}
	g.wg.Go(func() {
		actx, c := opCtx(g.ctx)
		defer c()
		if err := g.announceCarried(actx, req); err != nil {
			g.log.Warn("gateway: record announce delivered (afterRun retries)", "run", req.RunID, "err", err)
		}
	})
}

// invoke runs the agent's turn in its runtime, with the context it is
// given.
func (r *run) invoke(ctx context.Context, history []json.RawMessage) (*runtime.Result, error) {
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	if r.watch != nil {
		// a kill, a sweep's timeout or a stop ends the turn here
		// (no read when the turn ends first: every run watches)
		go func() {
			select {
			case rec := <-r.watch.C():
				r.ended.Store(rec)
				acancel()
			case <-actx.Done():
			}
		}()
	}
	var steer runtime.Steering
	if r.steer != nil {
		steer = r.steer
	}
	return r.g.runAgent(actx, r.req, history, r.sess, r.model(), r.child, r.live.Emit, steer)
}

// finish records how the turn ended: its reply is appended (wave 3) unless
// the turn failed or yielded or an earlier attempt appended it, then the
// outcome is recorded (wave 4).
func (r *run) finish(ctx context.Context, res *runtime.Result, replied bool, runErr error) (*runs.Record, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	status, errText, reply := r.outcome(res, runErr)
	// the end goes out before the reply is written: the transcript, not
	// the live output, is the record, and a watcher need not wait for it
	if status == runs.OK {
		r.live.Done(reply, res == nil || !res.Yielded)
	} else {
		r.live.Fail(errText)
	}
	// the turn ended here: its reply, appended next, frees the session,
	// and the next run's start comes after it
	endedAt := time.Now().UnixMilli()
	var tu *turnUsage
	if !replied {
		tu = r.turnUsage(res, reply)
	} else if r.compacted != nil {
		tu = &turnUsage{compacted: r.compacted}
	}
	// a yielded turn has no reply of its own (docs/runtimes.md)
	if status == runs.OK && !replied && (res == nil || !res.Yielded) {
		// errEnded: killed or timed out meanwhile, with another run
		// in the session since; the record keeps what ended it
		if err := r.appendReply(octx, reply, tu); err != nil && !errors.Is(err, errEnded) {
			return nil, err
		}
	}
	return r.recordOutcome(octx, status, errText, reply, tu, endedAt)
}

// outcome is the status, error text and reply the run record is to carry.
func (r *run) outcome(res *runtime.Result, runErr error) (status, errText, reply string) {
	status = runs.OK
	switch {
	case runErr == nil:
		if res != nil {
			reply = res.Reply
		}
	case errors.Is(runErr, runtime.ErrTimeout), errors.Is(runErr, context.DeadlineExceeded):
		status, errText = runs.Timeout, runErr.Error()
	default:
		status, errText = runs.Error, runErr.Error()
	}
	// The run error is the one place a runtime's stderr and a provider's
	// error text enter the bus (run record, announce, subagents, status):
	// mask credentials here, once, before any of them reads it.
	errText, _ = r.g.redact.ToolPayload(errText)
	return status, errText, reply
}

// appendReply is wave 3: the agent's reply, after the prompt, with the
// provider's usage in OpenClaw's shape (an estimate is not recorded as
// usage), and in its marker the context's size the next turn starts from.
func (r *run) appendReply(ctx context.Context, reply string, tu *turnUsage) error {
	m := marker{Run: r.req.RunID, Part: "reply"}
	msg := map[string]any{"role": "assistant", "content": reply}
	if tu != nil && tu.usage != nil && !tu.estimated {
		msg["usage"] = usageJSON(tu.usage, r.g.cfg.ModelLimits(r.modelRef()).Cost)
		m.Context = tu.usage.ContextTokens()
	}
	msg[runMarker] = m
	data, _ := bus.Marshal(msg)
	return r.appendPart(ctx, "reply", data, nil)
}

// recordOutcome is wave 4: the run record takes the outcome (endedAt: when
// the turn ended), the transcript index moves to the end and the session is
// touched. Nothing is released: the reply freed the session, and a turn
// without one is freed by this terminal record.
func (r *run) recordOutcome(ctx context.Context, status, errText, reply string, tu *turnUsage, endedAt int64) (*runs.Record, error) {
	g, req := r.g, r.req
	r.stopHeartbeat()
	var wg sync.WaitGroup
	// The index head moves once per many turns, not every turn: until
	// then each entry lists what the head lacks, and readers extend it
	// from the newest entry they fetch anyway (transcripts.Cursor.FlushDue).
	if r.cur.FlushDue() {
		wg.Go(func() {
			if err := g.tr.Flush(ctx, r.cur); err != nil {
				g.log.Debug("gateway: transcript index lags (readers repair it)", "run", req.RunID, "err", err)
			}
		})
	}
	turnStatus := status
	if req.Compact != nil {
		turnStatus = "" // a compaction is no turn: abortedLastRun stays
	}
	wg.Go(func() { g.touchSession(ctx, req, r.sess, r.sessRev, tu, turnStatus, r.gone) })
	var inbox []runs.InboxMessage
	rec, _, err := g.runs.UpdateFrom(ctx, req.RunID, r.rec, r.rev, func(rr *runs.Record) error {
		inbox = rr.Inbox // as the run ends: what came for it (steer.go)
		if rr.Terminal() {
			return record.ErrUnchanged // killed or stopped meanwhile: keep that
		}
		rr.Status = status
		rr.Error = errText
		rr.EndedAt = endedAt
		if status == runs.OK {
			rr.Reply = sanitize.VisibleText(reply, sanitize.Delivery)
		}
		return nil
	})
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("record outcome: %w", err)
	}
	r.queueLeftovers(ctx, inbox)
	return rec, nil
}

// createSession creates the entry of a session that has none yet, so
// tools the agent calls during its turn find it.
func (g *Gateway) createSession(ctx context.Context, req *runqueue.Request, child *subagents.Record) error {
	now := time.Now().UnixMilli()
	e := &sessions.Entry{
		Key: req.SessionKey, AgentID: req.AgentID, SessionID: sessions.NewID(),
		CreatedAt: now, UpdatedAt: now,
	}
	if child != nil {
		e = spawns.ChildEntry(child) // the spawn's own write of it was lost
	}
	_, err := g.store.Create(ctx, e)
	if err != nil && !errors.Is(err, sessions.ErrExists) {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// touchSession bumps the session's updatedAt after a turn, from the entry
// read when the run started (nil: created by createSession, read it), and
// records the turn's usage and compaction count (tu, nil: none). A turn's
// status (status "": no turn) sets abortedLastRun, as OpenClaw's session
// entry has it: true after an aborted turn, cleared by the next turn. A
// failure only leaves them older; the turn is recorded regardless.
func (g *Gateway) touchSession(ctx context.Context, req *runqueue.Request, cur *sessions.Entry, rev uint64, tu *turnUsage, status string, gone []string) {
	now := time.Now().UnixMilli()
	_, _, err := g.store.UpdateFrom(ctx, req.SessionKey, cur, rev, func(e *sessions.Entry) error {
		e.UpdatedAt = max(e.UpdatedAt, now)
		leaveLine(e, req.RunID, gone) // the run waits no more (line.go)
		if status != "" {
			e.AbortedLastRun = status == runs.Aborted
		}
		if tu != nil {
			tu.apply(e)
		}
		return nil
	})
	if err != nil {
		g.log.Warn("gateway: touch session", "session", req.SessionKey, "err", err)
	}
}
