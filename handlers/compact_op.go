package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/runreq"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// compactWait bounds how long the compact op waits for a gateway to run
// the compaction: a summary of a long session takes several model calls.
const compactWait = 5 * time.Minute

// compactResult is the reply of <prefix>.ops.session.compact.
type compactResult struct {
	Status          string `json:"status"` // ok, error, or accepted (still running)
	SessionKey      string `json:"sessionKey"`
	RunID           string `json:"runId"`
	CompactionCount int64  `json:"compactionCount"`
	Result          string `json:"result,omitempty"`
	Error           string `json:"error,omitempty"`
}

// compactOp is <prefix>.ops.session.compact: {"sessionKey",
// "instructions"?}. A gateway compacts the session as a run under its
// lane (the session's model writes the summary); the op waits for the
// outcome. A session that does not exist is refused.
func (d *Deps) compactOp(ctx context.Context, key string, p rules.Params) (any, error) {
	instructions, _, err := p.String("instructions")
	if err != nil {
		return nil, bus.Thrown(err)
	}
	e, _, err := d.Store.Get(ctx, key)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, bus.Errorf(bus.CodeNotFound, "no session %s: check the key with `sessionbus ls`", key)
	}
	if err != nil {
		return nil, err
	}
	out := compactResult{Status: "accepted", SessionKey: key}
	done, err := d.compact(ctx, key, e, instructions, compactWait, &out.RunID)
	if err != nil {
		return nil, err
	}
	if done == nil {
		return out, nil // still running: `sessionbus runs` shows it
	}
	out.Status, out.Result, out.Error = "ok", done.Reply, done.Error
	if done.Status != runs.OK {
		out.Status = "error"
	}
	if e, _, err := d.Store.Get(ctx, key); err == nil {
		out.CompactionCount = e.Rares().CompactionCount
	}
	return out, nil
}

// compact queues a compaction run of session key (entry e) and waits up to
// wait for its record: nil when it is still running then. The run's id is
// stored in *runID as soon as it is chosen. The compact op and /compact
// both run it.
func (d *Deps) compact(ctx context.Context, key string, e *sessions.Entry, instructions string, wait time.Duration, runID *string) (*runs.Record, error) {
	agentID := rules.FirstNonEmpty(e.AgentID, rules.AgentIDFromKey(key))
	id, now := sessions.NewID(), d.Now().UnixMilli()
	*runID = id
	req := &runqueue.Request{
		RunID: id, SessionKey: key, AgentID: agentID, ChainID: id, CreatedAt: now,
		Compact: &runreq.CompactRef{Instructions: instructions},
	}
	rec := &runs.Record{RunID: id, SessionKey: key, AgentID: agentID, Status: runs.Pending, CreatedAt: now, ChainID: id}
	q, err := d.starter().Start(ctx, "compact", req, rec, true)
	if err != nil {
		return nil, err
	}
	defer q.Stop()
	return q.Wait(ctx, wait)
}
