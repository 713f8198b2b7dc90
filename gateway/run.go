package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// opTimeout bounds each bookkeeping step (KV, transcript) of a run.
const opTimeout = 10 * time.Second

func opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, opTimeout)
}

// run is one delivered run request on its way to a recorded outcome.
//
// Its cost is counted in waves. A wave is a set of JetStream requests
// issued together and awaited together; with the server syncing every write
// to disk before it acknowledges it (the default), the number of sequential
// waves is what a run costs in latency. The common case takes four, three
// of them writes:
//
//  1. claim: read the transcript's end (index head and newest entry), the
//     run record and the session entry, and find whether another run
//     holds the session (lane.go);
//  2. start: record running, then append the prompt, whose compare-and-set
//     on the transcript's end holds the session for the run;
//  3. appendReply: append the reply after the agent's turn, which frees
//     the session;
//  4. recordOutcome: record the outcome, move the transcript index, touch
//     the session.
type run struct {
	g   *Gateway
	req *runqueue.Request
	key rules.Key // req.SessionKey, parsed once
	msg jetstream.Msg
	enc string

	rec *runs.Record // as last read or written, at revision rev
	rev uint64
	cur *transcripts.Cursor
	// holds is set once the run's first part is in the transcript (or an
	// earlier attempt's is): the session is the run's until its reply
	holds   bool
	sess    *sessions.Entry // nil: no such session yet
	sessRev uint64

	// child is the registry record when the run is a sub-agent's current
	// run; watch reports the run record turning terminal from outside (a
	// kill, a sweep's timeout, a stop), which cancels the turn, and ended
	// keeps that record
	child *subagents.Record
	watch *runs.Waiter
	ended atomic.Pointer[runs.Record]
	live  *LiveOutput // this attempt's live output

	// tc is the model's context (nil: the runtime reads none); compacted
	// the compaction this run appended (or an earlier attempt did)
	tc        *turnContext
	compacted *compactionEntry

	hbStop context.CancelFunc
	hbWG   sync.WaitGroup

	// gone are ended runs the claim passed over in the session's waiting
	// line (line.go), dropped from it by the run's last write
	gone []string
	// steer brings messages steered into the turn (steer.go); nil: its
	// agent's turns cannot be steered
	steer *steering
}

// execute runs req to a recorded outcome. It returns nil when the message
// should be acked.
func (g *Gateway) execute(ctx context.Context, msg jetstream.Msg, req *runqueue.Request) error {
	key := rules.ParseKey(req.SessionKey) // once for the whole run
	if g.childQueued(req, key) {
		return errChildQueued // every sub-agent slot is taken: wait, nothing read
	}
	r := &run{g: g, req: req, key: key, msg: msg, enc: bus.EncodeKey(req.SessionKey)}
	if err := r.claim(ctx); err != nil {
		if errors.Is(err, errBusy) {
			r.joinLine(ctx)
		}
		return err
	}
	if r.rec.Terminal() {
		// Redelivered after its outcome was recorded: never run twice; make
		// sure the flow it starts moved on (idempotent), and that what was
		// steered in too late runs (steer.go).
		r.leftoversOfEnded(ctx)
		return g.afterRun(ctx, req, r.rec)
	}
	child := r.childRecord(ctx)
	slot, err := r.takeChildSlot(ctx, child)
	if err != nil {
		return err
	}
	defer slot.free()
	if err := r.startChild(ctx, child); err != nil {
		return err
	}
	if r.rec.Terminal() { // past its deadline: ended without running
		return g.afterRun(ctx, req, r.rec)
	}
	if r.watch == nil {
		// any run's record may turn terminal from outside while its turn
		// runs (a stop: stop.go); registering costs no round trip, one
		// bucket-wide watch per process serves every run
		if r.watch, err = g.runs.Watch(req.RunID); err != nil {
			return fmt.Errorf("watch run record: %w", err)
		}
	}
	defer r.watch.Stop()
	r.startHeartbeat(ctx)
	defer r.stopHeartbeat()
	rec, err := r.turn(ctx)
	slot.free() // the outcome is recorded: the next child may start
	if err != nil {
		if errors.Is(err, errBusy) {
			r.joinLine(ctx) // another run's prompt won the session
		}
		return err
	}
	return g.afterRun(ctx, req, rec)
}

// claim is wave 1: it reads the transcript's end, the run record and the
// session entry, and returns errBusy when another run holds the session
// there. The end may move by the time the prompt goes out, which is safe:
// the prompt's compare-and-set fails, and the append reads the end again
// and checks it again (appendPart). The session entry is read every time:
// it carries the model override, which session_status changes through any
// worker, and a copy kept here would run the next turn with the old model.
func (r *run) claim(ctx context.Context) error {
	octx, cancel := opCtx(ctx)
	defer cancel()
	var endErr, sessErr, recErr error
	var wg sync.WaitGroup
	wg.Go(func() { endErr = r.openEnd(octx) })
	wg.Go(func() { r.sess, r.sessRev, sessErr = r.g.store.Get(octx, r.req.SessionKey) })
	if r.fresh() {
		// nobody wrote its record: turn will create it (CAS on revision 0)
		r.rec, r.rev = newRecord(r.req), 0
	} else {
		r.rec, r.rev, recErr = r.g.runs.Get(octx, r.req.RunID)
	}
	if errors.Is(recErr, jetstream.ErrKeyNotFound) {
		// its pending record was lost (or this is an A2A step whose record
		// write was): create it
		r.rec, r.rev, recErr = r.g.createRecord(octx, r.req)
	}
	wg.Wait()
	if errors.Is(sessErr, sessions.ErrNotFound) {
		r.sess, sessErr = nil, nil
	}
	if recErr == nil && r.rec.Terminal() {
		return nil
	}
	if err := errors.Join(recErr, endErr, sessErr); err != nil {
		return err
	}
	if r.rec.Status == runs.Pending {
		if d := quietLeft(r.rec, time.Now()); d > 0 {
			return errQuiet{d} // a collect batch still gathering (collect.go)
		}
		// free, but runs queued before this one may still wait for it (a
		// redelivered running attempt holds its place already)
		return r.aheadInLine(octx)
	}
	return nil
}

// openEnd reads the transcript's end, the index head and the newest entry
// in one round trip, and returns errBusy when another run holds the
// session there. The end is read every run, not kept from the session's
// last run on this gateway: with replicas sharing a session's runs a kept
// end was stale for about 4 runs in 10, and finding that out cost a read
// wave of its own before this one. The index head lags by design and the
// newest entry brings what it lacks (transcripts.Cursor), so the read
// costs no repair. The newest entry names the run that may hold the
// session; its record is read only when that is another run's part other
// than a reply.
func (r *run) openEnd(ctx context.Context) error {
	var err error
	if r.cur, err = r.g.tr.OpenCursor(ctx, r.enc, true); err != nil {
		return err
	}
	return r.heldByOther(ctx)
}

// fresh reports a first delivery of a run queued without a record.
func (r *run) fresh() bool {
	if r.req.Recorded {
		return false
	}
	md, err := r.msg.Metadata()
	return err == nil && md.NumDelivered == 1
}

// createRecord writes a pending record for a request that came without one.
func (g *Gateway) createRecord(ctx context.Context, req *runqueue.Request) (*runs.Record, uint64, error) {
	if err := g.runs.RecordPending(ctx, newRecord(req)); err != nil {
		return nil, 0, err
	}
	return g.runs.Get(ctx, req.RunID)
}

func newRecord(req *runqueue.Request) *runs.Record {
	return &runs.Record{
		RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID,
		Status: runs.Pending, CreatedAt: time.Now().UnixMilli(),
		ChainID: req.ChainID, Hop: req.Hop,
	}
}
