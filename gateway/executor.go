package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/kv/lanes"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/notices"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/sanitize"
	"github.com/sessionbus/sessionbus/spawns"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// runMarker tags transcript entries a run appended (handlers hide it).
const runMarker = "__sessionbus"

const historyLimit = 20

type marker struct {
	Run  string `json:"run"`
	Part string `json:"part"`
}

// opTimeout bounds each bookkeeping step (KV, transcript) of a run.
const opTimeout = 10 * time.Second

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
		if errors.Is(err, lanes.ErrBusy) {
			outcome = "busy"
			_ = msg.NakWithDelay(laneRetryDelay(msg))
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
// count the naks of a run waiting for a busy lane, and such a run must wait
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

// laneRetryDelay backs off with the number of deliveries: a queued request
// polls its busy lane quickly at first, then at most every 500 ms.
func laneRetryDelay(msg jetstream.Msg) time.Duration {
	n := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		n = md.NumDelivered
	}
	d := 10 * time.Millisecond << min(n-1, 6)
	return min(d, 500*time.Millisecond)
}

func opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, opTimeout)
}

// run is one delivered run request on its way to a recorded outcome. The
// common case costs four waves of pipelined round trips: (1) take the
// lane, read the transcript's end, the run record and the session entry;
// (2) record running, then append the prompt; (3) append the reply after
// the turn; (4) record the outcome, move the transcript index, touch the
// session, release the lane.
type run struct {
	g   *Gateway
	req *runqueue.Request
	msg jetstream.Msg
	enc string

	rec     *runs.Record // as last read or written, at revision rev
	rev     uint64
	lane    *lanes.Lane
	cur     *transcripts.Cursor
	sess    *sessions.Entry // nil: no such session yet
	sessRev uint64

	// child is the registry record when the run is a sub-agent's current
	// run; watch then reports its run record turning terminal (a kill, a
	// sweep's timeout), which cancels the turn
	child *subagents.Record
	watch *runs.Waiter

	hbStop   context.CancelFunc
	hbWG     sync.WaitGroup
	laneMu   sync.Mutex
	released bool
}

// execute runs req to a recorded outcome. It returns nil when the message
// should be acked.
func (g *Gateway) execute(ctx context.Context, msg jetstream.Msg, req *runqueue.Request) error {
	r := &run{g: g, req: req, msg: msg, enc: bus.EncodeKey(req.SessionKey)}
	if err := r.prepare(ctx); err != nil {
		return err
	}
	if r.rec.Terminal() {
		// Redelivered after its outcome was recorded: never run twice; make
		// sure the flow it starts moved on (idempotent).
		r.releaseLane()
		return g.afterRun(ctx, req, r.rec)
	}
	if err := r.startChild(ctx); err != nil {
		r.releaseLane()
		return err
	}
	if r.rec.Terminal() { // past its deadline: ended without running
		r.releaseLane()
		return g.afterRun(ctx, req, r.rec)
	}
	if r.watch != nil {
		defer r.watch.Stop()
	}
	r.startHeartbeat(ctx)
	defer r.releaseLane()
	rec, err := r.turn(ctx)
	if err != nil {
		return err
	}
	return g.afterRun(ctx, req, rec)
}

// prepare is wave 1. The transcript's end is read before the lane is
// surely ours, which is safe: a stale end only fails the prompt's
// compare-and-set, and the append then re-reads it.
func (r *run) prepare(ctx context.Context) error {
	octx, cancel := opCtx(ctx)
	defer cancel()
	var laneErr, curErr, sessErr, recErr error
	var wg sync.WaitGroup
	wg.Go(func() { r.lane, laneErr = r.g.acquireLane(octx, r.req.SessionKey, r.req.RunID) })
	// The transcript's end as this gateway left it after the session's
	// last run here, else read. A stale cursor fails the prompt's
	// compare-and-set (the append re-reads the end). The session entry is
	// read every time, beside the lane: it carries the model override,
	// which session_status changes through any worker, and a copy kept here
	// would run the next turn with the old model.
	cached := false
	if c, ok := r.g.cursors.take(r.enc); ok {
		r.cur, cached = c, true
	} else {
		wg.Go(func() { r.cur, curErr = r.g.tr.OpenCursor(octx, r.enc, false) })
	}
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
	if err := errors.Join(recErr, laneErr, curErr, sessErr); err != nil {
		r.releaseLane()
		if laneErr != nil && errors.Is(laneErr, lanes.ErrBusy) {
			return lanes.ErrBusy
		}
		return err
	}
	if cached && !r.lane.Resumed() {
		// another gateway held the lane since this one kept the cursor:
		// its turn moved the end, and appending at the kept one would fail
		// its compare-and-set and cost a second record write (the moved
		// position); read the end the index has now instead
		var err error
		if r.cur, err = r.g.tr.OpenCursor(octx, r.enc, false); err != nil {
			r.releaseLane()
			return err
		}
	}
	return nil
}

// model is the model id the turn runs with: the session's override, which
// session_status sets, else the agent's own agents.list[].model; "" leaves
// the runtime's configured model.
func (r *run) model() string {
	if r.sess != nil && r.sess.Rares().ModelOverride != "" {
		return r.sess.Rares().ModelOverride
	}
	for _, a := range r.g.cfg.Agents.List {
		if a.ID == r.req.AgentID {
			if ref, ok := config.ParseModelRef(a.Model, config.DefaultModelProvider); ok {
				return ref.Model
			}
		}
	}
	return ""
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

// startHeartbeat keeps the message and the lane ours while the turn runs.
func (r *run) startHeartbeat(ctx context.Context) {
	hbCtx, stop := context.WithCancel(ctx)
	r.hbStop = stop
	r.hbWG.Go(func() {
		t := time.NewTicker(r.g.heartbeat())
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				_ = r.msg.InProgress()
				r.laneMu.Lock()
				rctx, c := opCtx(hbCtx)
				if !r.lane.Refresh(rctx) && hbCtx.Err() == nil {
					r.g.log.Warn("gateway: lane lock lost", "run", r.req.RunID, "session", r.req.SessionKey)
				}
				c()
				r.laneMu.Unlock()
			}
		}
	})
}

func (r *run) stopHeartbeat() {
	if r.hbStop != nil {
		r.hbStop()
		r.hbWG.Wait()
		r.hbStop = nil
	}
}

// releaseLane stops the heartbeat and frees the lane; safe to call twice.
func (r *run) releaseLane() { r.startHandOver()(false) }

// startHandOver does what must come before the outcome is written (stop
// the heartbeat, tell this gateway's next run of the session to wait for
// this one's last wave instead of finding the lane busy) and returns what
// ends the lane's hold, to run once the outcome is written: freed says the
// outcome itself freed the lane (runs.Record.FreesLane), and only the
// revision to take it again from is kept; otherwise it is released with a
// write.
func (r *run) startHandOver() func(freed bool) {
	if r.released {
		return func(bool) {}
	}
	r.released = true
	r.stopHeartbeat()
	if r.lane == nil {
		return func(bool) {}
	}
	done := r.g.releasing.start(r.lane.Key())
	return func(freed bool) {
		defer done()
		if freed {
			r.g.laneRevs.put(r.lane.Key(), r.lane.Rev())
			return
		}
		rctx, c := opCtx(context.Background())
		defer c()
		r.g.releaseLane(rctx, r.lane)
	}
}

// turn holds the lane: it records running, appends the prompt, runs the
// agent, appends the reply and records the outcome.
func (r *run) turn(ctx context.Context) (*runs.Record, error) {
	g, req := r.g, r.req
	octx, cancel := opCtx(ctx)
	defer cancel()

	// What an earlier attempt wrote sits at its recorded position.
	var mine []transcripts.Entry
	if at := r.rec.TranscriptAt; at != nil {
		var err error
		if mine, err = g.tr.Read(octx, r.enc, *at, *at+3); err != nil {
			return nil, fmt.Errorf("read transcript: %w", err)
		}
	}
	var history []json.RawMessage
	if g.wantsHistory[req.AgentID] {
		tail, _, err := g.tr.Tail(octx, r.enc, historyLimit, 0)
		if err != nil {
			return nil, fmt.Errorf("read transcript: %w", err)
		}
		for _, e := range tail {
			history = append(history, json.RawMessage(e.Data))
		}
	}

	// wave 2
	var sessErr error
	var sessWG sync.WaitGroup
	if r.sess == nil {
		sessWG.Go(func() { sessErr = g.createSession(octx, req, r.child) })
	}
	wantPrompt := !hasPart(mine, req.RunID, "prompt")
	var prompt []byte
	var told []notices.Body // notices this turn delivers to a sub-agent watcher
	if wantPrompt {
		if rules.IsSubagentKey(req.SessionKey) {
			told = g.noticesForTurn(octx, req.SessionKey)
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
		prompt, _ = bus.Marshal(user)
		history = append(history, prompt)
	}
	if len(history) > historyLimit {
		history = history[len(history)-historyLimit:]
	}
	// The running record carries the position the prompt is written at,
	// and goes out first; the prompt follows without waiting for its ack.
	at := r.cur.Len()
	if !wantPrompt {
		at = *r.rec.TranscriptAt
	}
	var already *runs.Record
	waitRec, err := g.runs.UpdateAsync(octx, req.RunID, r.rec, r.rev, func(rr *runs.Record) error {
		if rr.Terminal() {
			already = rr // killed before it started
			return nil
		}
		rr.Status = runs.Running
		rr.Attempts++
		rr.Gateway = g.id
		rr.StartedAt = time.Now().UnixMilli()
		rr.Error = ""
		rr.TranscriptAt = &at
		return nil
	})
	if err != nil {
		sessWG.Wait()
		return nil, fmt.Errorf("record running: %w", err)
	}
	recorded := false
	awaitRec := func() error {
		if recorded {
			return nil
		}
		recorded = true
		rec, rev, err := waitRec()
		if err != nil {
			return fmt.Errorf("record running: %w", err)
		}
		r.rec, r.rev = rec, rev
		return nil
	}
	if wantPrompt {
		err = r.appendPart(octx, "prompt", prompt, func(ctx context.Context, moved uint64) error {
			// the end moved under the lane: record the new position before
			// writing there
			if err := awaitRec(); err != nil {
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
	err = errors.Join(awaitRec(), err)
	sessWG.Wait()
	if already != nil {
		return already, nil
	}
	if err = errors.Join(err, sessErr); err != nil {
		for _, n := range told {
			g.pending.add(n) // not delivered: the next attempt tells them
		}
		return nil, err
	}
	for _, n := range told {
		if err := g.ackNotice(octx, n); err != nil {
			g.log.Warn("gateway: acknowledge a notice (the sweep retries)", "watcher", n.Watcher, "target", n.Target, "err", err)
		}
	}
	cancel()
	if req.Announce != nil {
		// the announce it carries is in the requester's transcript now
		g.wg.Go(func() {
			actx, c := opCtx(g.ctx)
			defer c()
			if err := g.announceCarried(actx, req); err != nil {
				g.log.Warn("gateway: record announce delivered (afterRun retries)", "run", req.RunID, "err", err)
			}
		})
	}

	// A previous attempt that appended its reply but died before recording
	// the outcome already ran the turn: record that reply, never run twice.
	var res *runtime.Result
	var runErr error
	prevReply, replied := findPart(mine, req.RunID, "reply")
	if replied {
		res = &runtime.Result{Reply: prevReply}
	} else {
		actx, acancel := context.WithCancel(ctx)
		if r.watch != nil {
			// a kill or a sweep's timeout ends the turn here
			go func() {
				if rec, err := r.watch.Wait(actx); err == nil && rec.Terminal() {
					acancel()
				}
			}()
		}
		res, runErr = g.runAgent(actx, req, history, r.sess, r.model(), r.child)
		acancel()
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopping: leave it to another replica
		}
	}

	octx, cancel = opCtx(ctx)
	defer cancel()
	status, errText, reply := runs.OK, "", ""
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
	errText, _ = g.redact.ToolPayload(errText)
	// a yielded turn has no reply of its own (docs/runtimes.md)
	if status == runs.OK && !replied && (res == nil || !res.Yielded) {
		// wave 3
		data, _ := bus.Marshal(map[string]any{
			"role":    "assistant",
			"content": reply,
			runMarker: marker{Run: req.RunID, Part: "reply"},
		})
		if err := r.appendPart(octx, "reply", data, nil); err != nil {
			return nil, err
		}
	}

	// wave 4: the outcome also frees the lane, so no release is written
	// (runs.Record.FreesLane); a lane whose run was killed or timed out by
	// a sweep meanwhile is released after it
	handOver := r.startHandOver()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := g.tr.Flush(octx, r.cur); err != nil {
			g.log.Debug("gateway: transcript index lags (readers repair it)", "run", req.RunID, "err", err)
			return
		}
		g.cursors.put(r.enc, r.cur)
	})
	wg.Go(func() { g.touchSession(octx, req, r.sess, r.sessRev) })
	ended := false
	rec, _, err := g.runs.UpdateFrom(octx, req.RunID, r.rec, r.rev, func(rr *runs.Record) error {
		if rr.Terminal() {
			ended = false
			return nil // killed meanwhile: keep that
		}
		ended = true
		rr.FreesLane = r.lane != nil
		rr.Status = status
		rr.Error = errText
		rr.EndedAt = time.Now().UnixMilli()
		if status == runs.OK {
			rr.Reply = sanitize.VisibleText(reply, sanitize.Delivery)
		}
		return nil
	})
	wg.Wait()
	handOver(err == nil && ended)
	if err != nil {
		return nil, fmt.Errorf("record outcome: %w", err)
	}
	return rec, nil
}

// appendPart appends one of the run's own entries at the cursor, with a
// message id the server deduplicates. A writer outside the lane (an import,
// say) can move the end under it: re-read the end, let moved record the new
// position, and append there.
func (r *run) appendPart(ctx context.Context, part string, data []byte, moved func(context.Context, uint64) error) error {
	id := r.req.RunID + "." + part
	for attempt := 0; ; attempt++ {
		_, _, err := r.g.tr.AppendAt(ctx, r.cur, id, data)
		if err == nil {
			return nil
		}
		if !errors.Is(err, transcripts.ErrConflict) || attempt >= maxAppendMoves {
			return fmt.Errorf("append %s: %w", part, err)
		}
		if r.cur, err = r.g.tr.OpenCursor(ctx, r.enc, true); err != nil {
			return fmt.Errorf("append %s: %w", part, err)
		}
		if moved != nil {
			if err := moved(ctx, r.cur.Len()); err != nil {
				return err
			}
		}
	}
}

// maxAppendMoves bounds how often other writers may move a transcript's end
// under one append before the run fails (and is retried).
const maxAppendMoves = 8

// runAgent runs the turn with its own deadline and identity token. sess
// is the session's entry (nil when it had none): a sub-agent's entry
// decides which tools its turn is offered; model is the one the turn
// uses; child is the sub-agent's registry record (nil for other
// sessions), whose deadline bounds the turn.
func (g *Gateway) runAgent(ctx context.Context, req *runqueue.Request, history []json.RawMessage, sess *sessions.Entry, model string, child *subagents.Record) (*runtime.Result, error) {
	secs := req.TimeoutSeconds
	if secs <= 0 {
		secs = DefaultTimeoutSeconds
	}
	timeout := time.Duration(secs) * time.Second
	if d := deadline(child); !d.IsZero() {
		// a child's run also stops at its deadline, set at its first start
		// and kept across redeliveries: min(its timeout, the time left)
		if left := time.Until(d); left < timeout {
			timeout, secs = max(left, time.Millisecond), child.RunTimeoutSeconds
		}
	}
	// Minting signs a JWT, which costs more than a JetStream round trip, so
	// it happens only for a runtime that hands the token out (exec) or a
	// turn that calls a tool.
	var minted atomic.Bool
	mint := sync.OnceValues(func() (string, error) {
		// the token ends with the run: its timeout plus a margin, and the
		// revocation below when the turn returns
		token, err := g.op.Mint(bus.Caller{SessionKey: req.SessionKey, AgentID: req.AgentID, RunID: req.RunID}, min(timeout+time.Minute, bus.MaxTokenTTL))
		if err != nil {
			return "", &runtime.RunError{Message: "mint run token: " + err.Error()}
		}
		minted.Store(true)
		return token, nil
	})
	defer func() {
		if minted.Load() {
			g.revokeRun(req.RunID)
		}
	}()
	var token string
	if g.needsToken[req.AgentID] {
		var err error
		if token, err = mint(); err != nil {
			return nil, err
		}
	}
	rt := g.runtimes[req.AgentID]
	if rt == nil {
		rt = g.echo
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tools := runtime.ToolsFunc(func(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error) {
		token, err := mint()
		if err != nil {
			return nil, err
		}
		return bus.Call(ctx, g.nc, g.names, token, tool, params)
	})
	turn := runtime.Turn{
		SessionKey: req.SessionKey, AgentID: req.AgentID, RunID: req.RunID,
		Message: req.Message, Prompt: req.Prompt, ExtraSystemPrompt: req.ExtraSystemPrompt,
		Model: model, History: history, NATSURL: g.nc.ConnectedUrl(), Token: token,
		ToolsSubject: g.names.ToolsGroup(),
		AllowedTools: sessionTools(g.cfg, req.SessionKey, sess),
	}
	res, err := rt.Run(tctx, turn, tools)
	if err != nil && tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return res, &runtime.RunError{Message: fmt.Sprintf("run timed out after %ds", secs), Timeout: true}
	}
	return res, err
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
// read when the run started (nil: created by createSession, read it). A
// failure only leaves updatedAt older; the turn is recorded regardless.
func (g *Gateway) touchSession(ctx context.Context, req *runqueue.Request, cur *sessions.Entry, rev uint64) {
	now := time.Now().UnixMilli()
	_, _, err := g.store.UpdateFrom(ctx, req.SessionKey, cur, rev, func(e *sessions.Entry) error {
		e.UpdatedAt = max(e.UpdatedAt, now)
		return nil
	})
	if err != nil {
		g.log.Warn("gateway: touch session", "session", req.SessionKey, "err", err)
	}
}

// hasPart reports whether entries hold part of runID.
func hasPart(entries []transcripts.Entry, runID, part string) bool {
	_, ok := findPart(entries, runID, part)
	return ok
}

// findPart returns the content of the entry this run appended as part.
func findPart(entries []transcripts.Entry, runID, part string) (string, bool) {
	for _, e := range entries {
		if !strings.Contains(string(e.Data), runMarker) {
			continue
		}
		var m struct {
			M       *marker `json:"__sessionbus"`
			Content any     `json:"content"`
		}
		if json.Unmarshal(e.Data, &m) == nil && m.M != nil && m.M.Run == runID && m.M.Part == part {
			text, _ := m.Content.(string)
			return text, true
		}
	}
	return "", false
}

// revokeRun ends the validity of the run's tokens once its turn is over, so
// a token copied out of a runtime cannot be replayed. It uses its own
// deadline: the run's context may already be done (a kill, a shutdown).
func (g *Gateway) revokeRun(runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if g.revoked == nil {
		return
	}
	if err := g.revoked.Revoke(ctx, runID, revocations.ReasonEnded); err != nil {
		g.log.Warn("run token not revoked: it stays valid until it expires", "run", runID, "err", err)
	}
}
