// Package spawns finishes a sub-agent spawn from its registry record: the
// child's session entry (kv/sessions), its run record (kv/runs) and its
// queued run request (streams/runqueue). A spawn's commit point is the
// registry record (kv/subagents); whatever a spawn that stopped after it
// left undone, Complete does, from the record alone.
package spawns

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// ChildEntry is the session entry of a registered child, built from its
// record alone: sessions_spawn writes it, and Complete writes it again for
// a spawn that stopped before it did, so both write the same entry.
func ChildEntry(rec *subagents.Record) *sessions.Entry {
	depth := rec.Depth
	e := &sessions.Entry{
		Key:        rec.ChildSessionKey,
		AgentID:    rec.ChildAgentID,
		SessionID:  rec.ChildSessionID,
		CreatedAt:  rec.CreatedAt,
		UpdatedAt:  rec.CreatedAt,
		Label:      rec.Label,
		SpawnedBy:  rec.RequesterSessionKey,
		SpawnDepth: &depth,
		Model:      rec.Model,
	}
	e.SetRare(func(r *sessions.RareFields) {
		r.SubagentRole, r.SubagentControlScope = rec.SubagentRole, rec.SubagentControlScope
		r.ModelOverride, r.ThinkingLevel = rec.Model, rec.Thinking
	})
	if e.SessionID == "" { // a record written by hand (tests, imports)
		e.SessionID = sessions.NewID()
	}
	if o := rec.RequesterOrigin; rec.Thread && o != nil && o.Channel != "" {
		// a thread-bound child keeps its requester's route, so replies in
		// it (and its announce fallback) have somewhere to go
		e.DeliveryContext = &sessions.DeliveryContext{Channel: o.Channel, To: o.To, AccountID: o.AccountID, ThreadID: o.ThreadID}
	}
	return e
}

// RunRecord is the pending run record of a child's current run.
func RunRecord(rec *subagents.Record) *runs.Record {
	req := rec.Request
	return &runs.Record{
		RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, Status: runs.Pending,
		CreatedAt: req.CreatedAt, ChainID: req.ChainID, Hop: req.Hop,
	}
}

// Complete finishes a spawn that stopped after its registry record was
// written (the commit point): it creates the child's session entry if it
// is missing, and queues the record's run request unless its run record
// shows a gateway already has it. Every step is idempotent (the entry is a
// create, the run id is fixed and SB_RUNS drops a repeated message id
// within its dedupe window), so any number of gateways or workers may call
// it for the same record, at any time; a run that already started or
// ended is never queued again. It then marks the record Queued.
//
// Callers: a gateway's sweep of records that are Active, not Queued and
// older than a grace (docs/subagents.md, "Creation design").
func Complete(ctx context.Context, reg *subagents.Registry, store *sessions.Store, recs *runs.Records, q *runqueue.Queue, rec *subagents.Record) error {
	if rec.Request == nil { // an index copy: read the stored record
		stored, _, err := reg.Get(ctx, rec.ChildSessionKey)
		if err != nil {
			return fmt.Errorf("complete spawn %s: read the registry record: %w", rec.ChildSessionKey, err)
		}
		if stored.RunID != rec.RunID {
			return nil // steered meanwhile: the steer queued its own run
		}
		rec = stored
	}
	if rec.Request == nil {
		return fmt.Errorf("complete spawn %s: the registry record has no run request", rec.ChildSessionKey)
	}
	if _, err := store.Create(ctx, ChildEntry(rec)); err != nil && !errors.Is(err, sessions.ErrExists) {
		return fmt.Errorf("complete spawn %s: create the child session: %w", rec.ChildSessionKey, err)
	}
	req := *rec.Request
	publish := true
	if err := recs.Create(ctx, RunRecord(rec)); err != nil {
		if !errors.Is(err, runs.ErrExists) {
			return fmt.Errorf("complete spawn %s: record run %s: %w", rec.ChildSessionKey, req.RunID, err)
		}
		cur, _, gerr := recs.Get(ctx, req.RunID)
		if gerr != nil {
			return fmt.Errorf("complete spawn %s: read run %s: %w", rec.ChildSessionKey, req.RunID, gerr)
		}
		// pending: the publish may never have landed; anything else: a
		// gateway took the run
		publish = cur.Status == runs.Pending
	}
	if publish {
		req.Recorded = true
		if err := q.Publish(ctx, &req); err != nil {
			return fmt.Errorf("complete spawn %s: %w", rec.ChildSessionKey, err)
		}
	}
	_, err := reg.Update(ctx, rec.ChildSessionKey, func(r *subagents.Record) error {
		if r.Queued || r.RunID != req.RunID {
			return record.ErrUnchanged
		}
		r.Queued = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("complete spawn %s: mark queued: %w", rec.ChildSessionKey, err)
	}
	return nil
}
