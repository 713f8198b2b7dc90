package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// The steer action: restart a child's run with a new message.

type steerResult = schema.SubagentsSteerResult

// steer restarts a child with a new message: the registry record takes
// the new run first, so the interrupted run announces nothing; then the
// old run is killed and given up to 5 s to settle; then the new run is
// queued in the child's session.
func (c *subagentsCall) steer(ctx context.Context, target, message string) (*steerResult, error) {
	ch, f := c.resolveOrOwnership(target)
	if f != nil {
		return &steerResult{Status: f.Status, Action: "steer", Target: target, Error: f.Error}, nil
	}
	rec := ch.rec
	res := &steerResult{Action: "steer", Target: target, RunID: rec.RunID, SessionKey: rec.ChildSessionKey}
	if f := c.checkControl(ch); f != nil {
		res.Status, res.Error = f.Status, f.Error
		return res, nil
	}
	label := ch.label()
	if ch.ended() {
		res.Status, res.Text = "done", label+" is already finished."
		return res, nil
	}
	if c.ctl.callerKey == rec.ChildSessionKey {
		res.Status, res.Error = rules.StatusForbidden, errSubagentSelfSteer
		return res, nil
	}
	// The rate limit holds across stateless workers: a claim that expires
	// by itself (server TTL) after 2 s.
	limitKey := "steer." + bus.EncodeKey(c.ctl.callerKey) + "." + bus.EncodeKey(rec.ChildSessionKey)
	claimRev, err := c.d.Claims.Take(ctx, limitKey, c.ctl.callerKey, steerRateLimit)
	if err != nil {
		if errors.Is(err, claims.ErrTaken) {
			res.Status, res.Error = "rate_limited", errSubagentRateLimited
			return res, nil
		}
		return nil, err
	}
	// The runs quota after the claim, so a steer the claim refuses (it
	// queues nothing) costs no run. A refused steer gives its claim back:
	// held, it would refuse the retry the 429 asks for.
	if err := c.d.admitRun(c.ctl.callerKey); err != nil {
		if rerr := c.d.Claims.Release(ctx, limitKey, claimRev); rerr != nil {
			c.d.Log.Warn("subagents steer: release the rate-limit claim", "key", limitKey, "err", rerr)
		}
		return nil, err
	}

	sessionID := rec.ChildSessionID
	if e := c.d.Index.Get(rec.ChildSessionKey); e != nil && strings.TrimSpace(e.SessionID) != "" {
		sessionID = strings.TrimSpace(e.SessionID)
	}
	oldRunID, runID := rec.RunID, sessions.NewID()
	now := c.d.Now().UnixMilli()
	req := &runqueue.Request{
		RunID: runID, SessionKey: rec.ChildSessionKey, AgentID: rules.FirstNonEmpty(rec.ChildAgentID, rules.AgentIDFromKey(rec.ChildSessionKey)),
		Message: message, Prompt: message,
		Provenance: &runqueue.Provenance{Kind: provenanceInterSession, SourceSessionKey: c.ctl.callerKey, SourceTool: subagentsToolName},
		Lane:       subagentLane, ChainID: runID, CreatedAt: now,
	}
	finished := false
	_, err = c.d.Subagents.Update(ctx, rec.ChildSessionKey, func(r *subagents.Record) error {
		if r.RunID != oldRunID || !r.Active() {
			finished = true // ended or steered meanwhile
			return record.ErrUnchanged
		}
		r.RunID, r.Request, r.Queued = runID, req, false
		r.StartedAt, r.DeadlineAt, r.EndedAt = 0, 0, 0
		r.Outcome, r.Error, r.Announce = "", "", nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("steer %s: %w", rec.ChildSessionKey, err)
	}
	if finished {
		res.Status, res.Text = "done", label+" is already finished."
		return res, nil
	}
	if _, err := c.d.killRun(ctx, rec); err != nil {
		c.d.Log.Warn("subagents steer: kill the interrupted run", "run", oldRunID, "err", err)
	}
	wctx, cancel := context.WithTimeout(ctx, steerSettleTimeout)
	_, _ = c.d.Runs.Wait(wctx, oldRunID) // best effort, as in OpenClaw
	cancel()

	runRec := &runs.Record{RunID: runID, SessionKey: req.SessionKey, AgentID: req.AgentID, Status: runs.Pending, CreatedAt: now, ChainID: runID}
	if err := submit.Run(ctx, c.d.Queue, c.d.Runs, req, runRec); err != nil {
		// The registry record keeps the new run, unqueued: any gateway's
		// sweep queues its stored request again (same run id).
		return &steerResult{Status: "error", Action: "steer", Target: target, RunID: runID,
			SessionKey: rec.ChildSessionKey, SessionID: sessionID, Error: err.Error()}, nil
	}
	if _, err := c.d.Subagents.Update(ctx, rec.ChildSessionKey, func(r *subagents.Record) error {
		if r.RunID != runID || r.Queued {
			return record.ErrUnchanged
		}
		r.Queued = true
		return nil
	}); err != nil {
		c.d.Log.Warn("subagents steer: mark queued", "run", runID, "err", err)
	}
	return &steerResult{Status: "accepted", Action: "steer", Target: target, RunID: runID, SessionKey: rec.ChildSessionKey,
		SessionID: sessionID, Mode: "restart", Label: label, Text: "steered " + label + "."}, nil
}
