package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

// Spawn steps a test hook (Deps.SpawnHook) may interrupt.
const (
	SpawnStepTranscript = "transcript" // fork copy and attachments, before the commit point
	SpawnStepRegistry   = "registry"   // the registry record: the commit point
	SpawnStepEntry      = "entry"      // the child's session entry
	SpawnStepRunRecord  = "run-record" // the pending run record
	SpawnStepPublish    = "publish"    // the run request on SB_RUNS
)

// spawnStep calls the test hook, if any, before a step of a spawn.
func (d *Deps) spawnStep(step string) error {
	if d.SpawnHook == nil {
		return nil
	}
	return d.SpawnHook(step)
}

// commit writes the spawn. With fork or attachments, the child's
// transcript up to its first message comes first, one atomic batch,
// before the commit point. Then the registry record (the commit point),
// the child's entry, the pending run record and the run request are sent
// back to back on this worker's connection, and every acknowledgement is
// awaited. The server reads a connection in order, so a crash of this
// process drops a suffix of the four: whatever landed is a prefix that
// starts with the registry record, which spawns.Complete finishes. A
// refused registry write is answered by rejected.
func (s *spawn) commit(ctx context.Context) (any, error) {
	d, rec := s.d, s.rec
	if res := s.bind(ctx); res != nil {
		return res, nil
	}
	fork := s.context == contextFork
	if fork || s.sp.hasAttachments {
		if err := d.spawnStep(SpawnStepTranscript); err != nil {
			return nil, err
		}
		if err := d.seedChildTranscript(ctx, s.r.key, rec.ChildSessionKey, fork, s.sp.attachments, s.attach, s.sp.idempotencyKey != ""); err != nil {
			s.unbind(ctx)
			return spawnFail("error", "sessions_spawn: write the child's transcript: "+err.Error()), nil
		}
	}
	w := &s.writes
	hookErr := s.send()
	if w.reg == nil {
		if hookErr != nil {
			return nil, hookErr
		}
		s.unbind(ctx)
		return spawnFail("error", "Failed to register subagent run: "+w.regErr.Error()), nil
	}
	w.wait(ctx)
	if w.regErr != nil {
		if hookErr != nil {
			return nil, hookErr
		}
		return s.rejected(ctx), nil
	}
	d.Children.Note(rec, w.regRev) // this worker's next fan-out check counts the child
	if hookErr != nil {
		return nil, hookErr
	}
	if err := errors.Join(w.entryErr, w.runRecErr, w.pubErr); err != nil {
		// Registered, so it will run: complete it now, or leave it to the
		// sweep, which does the same.
		if cerr := spawns.Complete(ctx, d.Subagents, d.Store, d.Runs, d.Queue, rec); cerr != nil {
			d.Log.Warn("sessions_spawn: spawn registered but not queued; a gateway sweep completes it", "child", rec.ChildSessionKey, "err", errors.Join(err, cerr))
			return &spawnResult{Status: "error", ChildSessionKey: rec.ChildSessionKey, RunID: rec.RunID, Error: fmt.Sprintf(
				"the child is registered but its run is not queued yet (%v); a gateway queues it shortly. Do not spawn it again: check with subagents list", errors.Join(err, cerr))}, nil
		}
	}
	return s.reply(rec), nil
}

// spawnWrites are a spawn's four writes, sent together: their futures, in
// the order they were sent, and their outcomes once awaited.
type spawnWrites struct {
	reg, entry, runRec, pub             jetstream.PubAckFuture
	regRev, entryRev                    uint64
	regErr, entryErr, runRecErr, pubErr error
}

// send puts the spawn's four writes on the connection, registry record
// first, without waiting for any acknowledgement. A hook error at the
// registry step stops everything (a crash before the commit point); at a
// later step it drops that write only and is returned: the state a lost
// or refused write leaves, which spawns.Complete must finish.
func (s *spawn) send() error {
	d, rec, w := s.d, s.rec, &s.writes
	if err := d.spawnStep(SpawnStepRegistry); err != nil {
		w.regErr = err
		return err
	}
	if w.reg, w.regErr = d.Subagents.CreateAsync(rec); w.regErr != nil {
		return nil // nothing sent
	}
	var crashed error
	send := func(step string, write func() (jetstream.PubAckFuture, error)) (jetstream.PubAckFuture, error) {
		if err := d.spawnStep(step); err != nil {
			crashed = errors.Join(crashed, err)
			return nil, nil
		}
		return write()
	}
	w.entry, w.entryErr = send(SpawnStepEntry, func() (jetstream.PubAckFuture, error) {
		return d.Store.CreateAsync(spawns.ChildEntry(rec))
	})
	w.runRec, w.runRecErr = send(SpawnStepRunRecord, func() (jetstream.PubAckFuture, error) {
		return d.Runs.CreateAsync(spawns.RunRecord(rec))
	})
	w.pub, w.pubErr = send(SpawnStepPublish, func() (jetstream.PubAckFuture, error) {
		return d.Queue.PublishAsync(rec.Request)
	})
	return crashed
}

// wait collects the acknowledgements. An entry that exists already is no
// error (a retry's, identical); a run record that exists is (Complete then
// decides whether its run was queued).
func (w *spawnWrites) wait(ctx context.Context) {
	ack := func(f jetstream.PubAckFuture, rev *uint64, err *error) {
		if f == nil || *err != nil {
			return
		}
		select {
		case a := <-f.Ok():
			if rev != nil {
				*rev = a.Sequence
			}
		case *err = <-f.Err():
		case <-ctx.Done():
			*err = ctx.Err()
		}
	}
	ack(w.reg, &w.regRev, &w.regErr)
	ack(w.entry, &w.entryRev, &w.entryErr)
	ack(w.runRec, nil, &w.runRecErr)
	ack(w.pub, nil, &w.pubErr)
	if bus.IsWrongLastSeq(w.entryErr) {
		w.entryErr = nil
		w.entry = nil // not this call's entry
	}
}

// rejected answers a spawn whose registry record the server refused,
// after its other writes were already sent behind it. If the record is
// there with this spawn's run id, a concurrent retry with the same
// idempotencyKey committed first: this call's writes were repeats of its
// own (same ids: the creates were refused, the run request's message id
// was dropped by SB_RUNS's dedupe) and its answer is the first call's.
// Otherwise nothing committed, and what landed behind the refused record
// is undone: the run is ended before any gateway runs it (its record made
// terminal; a gateway that took it already finds no registry record and
// refuses it, see gateway.startChild) and the entry this call created is
// deleted, so no run goes ahead without a child record.
//
// A failure that is no refusal by the server (the connection dropped with
// the acknowledgement pending, as when a cluster node dies) leaves the
// outcome unknown: the record is read back, and if it landed the spawn
// committed and is finished like one whose later writes were lost.
func (s *spawn) rejected(ctx context.Context) *spawnResult {
	d, rec, w := s.d, s.rec, &s.writes
	if bus.IsWrongLastSeq(w.regErr) {
		first, _, err := d.Subagents.Get(ctx, rec.ChildSessionKey)
		if err == nil && first.RunID == rec.RunID {
			return s.idempotent(first)
		}
	} else if !serverRefused(w.regErr) {
		first, rev, err := d.readBackRegistration(ctx, rec.ChildSessionKey)
		switch {
		case err == nil && first.RunID == rec.RunID && first.IdempotencyKey == rec.IdempotencyKey:
			if cerr := spawns.Complete(ctx, d.Subagents, d.Store, d.Runs, d.Queue, rec); cerr != nil {
				d.Log.Warn("sessions_spawn: spawn registered but not queued; a gateway sweep completes it", "child", rec.ChildSessionKey, "err", cerr)
			}
			d.Children.Note(first, rev)
			return s.accepted(first)
		case err != nil && !errors.Is(err, subagents.ErrNotFound):
			// still unknown: undoing could break a committed spawn, and a
			// run without its registry record is refused by the gateways
			return spawnFail("error", "Failed to register subagent run: "+w.regErr.Error())
		}
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	reason := "the spawn that queued this run was never registered: " + w.regErr.Error()
	ended := spawns.RunRecord(rec)
	ended.Status, ended.Error, ended.EndedAt = runs.Error, reason, d.Now().UnixMilli()
	err := d.Runs.Create(uctx, ended)
	if errors.Is(err, runs.ErrExists) {
		_, err = d.Runs.Update(uctx, rec.RunID, func(r *runs.Record) error {
			if r.Status != runs.Pending {
				return record.ErrUnchanged
			}
			r.Status, r.Error, r.EndedAt = ended.Status, ended.Error, ended.EndedAt
			return nil
		})
	}
	if w.entry != nil && w.entryErr == nil {
		err = errors.Join(err, d.Store.KV().Delete(uctx, bus.EncodeKey(rec.ChildSessionKey), jetstream.LastRevision(w.entryRev)))
	}
	err = errors.Join(err, spawns.UnbindSpawn(uctx, d.ThreadBindings, rec))
	if err != nil {
		d.Log.Warn("sessions_spawn: undo a spawn whose registration failed (a gateway refuses its run)", "child", rec.ChildSessionKey, "run", rec.RunID, "err", err)
	}
	return spawnFail("error", "Failed to register subagent run: "+w.regErr.Error())
}

// serverRefused reports an error the server answered (an API error), as
// opposed to one that leaves a write's outcome unknown.
func serverRefused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr)
}

// readBackRegistration reads a child's registry record after a write whose
// acknowledgement was lost, retrying for a few seconds while the
// connection reconnects.
func (d *Deps) readBackRegistration(ctx context.Context, childKey string) (*subagents.Record, uint64, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rec, rev, err := d.Subagents.Get(rctx, childKey)
		cancel()
		if err == nil || errors.Is(err, subagents.ErrNotFound) || ctx.Err() != nil || time.Now().After(deadline) {
			return rec, rev, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
