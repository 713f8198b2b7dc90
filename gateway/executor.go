package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/handlers/sanitize"
	"github.com/sessionbus/sessionbus/kv"
	"github.com/sessionbus/sessionbus/streams"
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
	var req streams.RunRequest
	if err := json.Unmarshal(msg.Data(), &req); err != nil || req.RunID == "" || req.SessionKey == "" {
		g.log.Warn("gateway: dropping malformed run request", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	log := g.log.With("run", req.RunID, "session", req.SessionKey)
	ctx := g.ctx
	if err := g.execute(ctx, msg, &req); err != nil {
		if errors.Is(err, errLaneBusy) {
			_ = msg.NakWithDelay(laneRetryDelay(msg))
			return
		}
		if ctx.Err() != nil {
			// Stopping: another replica picks it up at once.
			_ = msg.Nak()
			return
		}
		log.Warn("gateway: run failed, will retry", "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if err := msg.Ack(); err != nil {
		log.Debug("gateway: ack", "err", err)
	}
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

// execute runs req to a recorded outcome. It returns nil when the message
// should be acked.
func (g *Gateway) execute(ctx context.Context, msg jetstream.Msg, req *streams.RunRequest) error {
	rec, rev, err := g.ensureRecord(ctx, req)
	if err != nil {
		return err
	}
	if rec.Terminal() {
		// Redelivered after its outcome was recorded: never run twice; make
		// sure the flow it starts moved on (idempotent).
		return g.afterRun(ctx, req, rec)
	}
	octx, cancel := opCtx(ctx)
	ln, err := g.acquireLane(octx, req.SessionKey, req.RunID)
	cancel()
	if err != nil {
		return err
	}
	// Heartbeat: keep the message and the lane ours while the turn runs.
	hbCtx, hbStop := context.WithCancel(ctx)
	var hbWG sync.WaitGroup
	var laneMu sync.Mutex
	hbWG.Add(1)
	go func() {
		defer hbWG.Done()
		t := time.NewTicker(g.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				_ = msg.InProgress()
				laneMu.Lock()
				rctx, c := opCtx(hbCtx)
				if !ln.refresh(rctx) && hbCtx.Err() == nil {
					g.log.Warn("gateway: lane lock lost", "run", req.RunID, "session", req.SessionKey)
				}
				c()
				laneMu.Unlock()
			}
		}
	}()
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		hbStop()
		hbWG.Wait()
		rctx, c := opCtx(context.Background())
		ln.release(rctx)
		c()
	}
	defer release()

	rec, err = g.runTurn(ctx, req, rec, rev)
	if err != nil {
		return err
	}
	release()
	return g.afterRun(ctx, req, rec)
}

// ensureRecord returns the run record, creating a pending one for a request
// that came without (an A2A step whose record write was lost).
func (g *Gateway) ensureRecord(ctx context.Context, req *streams.RunRequest) (*streams.RunRecord, uint64, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	rec, rev, err := g.runs.Get(octx, req.RunID)
	if err == nil {
		return rec, rev, nil
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, err
	}
	rec = newRecord(req)
	data, _ := json.Marshal(rec)
	if _, err := g.runs.Records().Create(octx, req.RunID, data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, 0, err
	}
	return g.runs.Get(octx, req.RunID)
}

func newRecord(req *streams.RunRequest) *streams.RunRecord {
	return &streams.RunRecord{
		RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID,
		Status: streams.RunPending, CreatedAt: time.Now().UnixMilli(),
		ChainID: req.ChainID, Hop: req.Hop,
	}
}

// runTurn holds the lane: it records running, appends the prompt, runs the
// agent, appends the reply and records the outcome.
func (g *Gateway) runTurn(ctx context.Context, req *streams.RunRequest, cur *streams.RunRecord, rev uint64) (*streams.RunRecord, error) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	enc := kv.EncodeKey(req.SessionKey)
	count, err := g.tr.Count(octx, enc)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	var already *streams.RunRecord
	var prevAt *uint64
	rec, rev, err := g.runs.UpdateFrom(octx, req.RunID, cur, rev, func(r *streams.RunRecord) error {
		if r.Terminal() {
			already = r
			return nil
		}
		r.Status = streams.RunRunning
		r.Attempts++
		r.Gateway = g.id
		r.StartedAt = time.Now().UnixMilli()
		r.Error = ""
		prevAt = r.TranscriptAt
		if r.TranscriptAt == nil {
			r.TranscriptAt = &count
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record running: %w", err)
	}
	if already != nil {
		return already, nil
	}
	if err := g.touchSession(octx, req); err != nil {
		return nil, err
	}
	// What an earlier attempt wrote sits at its recorded position.
	var mine []streams.Entry
	if prevAt != nil {
		if mine, err = g.tr.Read(octx, enc, *prevAt, *prevAt+3); err != nil {
			return nil, fmt.Errorf("read transcript: %w", err)
		}
	}
	var history []json.RawMessage
	if g.wantsHistory[req.AgentID] {
		tail, _, err := g.tr.Tail(octx, enc, historyLimit, 0)
		if err != nil {
			return nil, fmt.Errorf("read transcript: %w", err)
		}
		for _, e := range tail {
			history = append(history, json.RawMessage(e.Data))
		}
	}
	if !hasPart(mine, req.RunID, "prompt") {
		if prevAt != nil {
			// the earlier attempt died before writing: write at the end now
			if _, err := g.runs.Update(octx, req.RunID, func(r *streams.RunRecord) error {
				r.TranscriptAt = &count
				return nil
			}); err != nil {
				return nil, fmt.Errorf("record transcript position: %w", err)
			}
		}
		user := map[string]any{
			"role":    "user",
			"content": req.Prompt,
			runMarker: marker{Run: req.RunID, Part: "prompt"},
		}
		if req.Provenance != nil {
			user["provenance"] = req.Provenance
		}
		data, _ := json.Marshal(user)
		if _, err := g.tr.Append(octx, enc, data); err != nil {
			return nil, fmt.Errorf("append prompt: %w", err)
		}
		history = append(history, data)
	}
	if len(history) > historyLimit {
		history = history[len(history)-historyLimit:]
	}
	cancel()

	// A previous attempt that appended its reply but died before recording
	// the outcome already ran the turn: record that reply, never run twice.
	var res *runtime.Result
	var runErr error
	prevReply, replied := findPart(mine, req.RunID, "reply")
	if replied {
		res = &runtime.Result{Reply: prevReply}
	} else {
		res, runErr = g.runAgent(ctx, req, history)
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopping: leave it to another replica
		}
	}

	octx, cancel = opCtx(ctx)
	defer cancel()
	status, errText, reply := streams.RunOK, "", ""
	switch {
	case runErr == nil:
		if res != nil {
			reply = res.Reply
		}
	case errors.Is(runErr, runtime.ErrTimeout), errors.Is(runErr, context.DeadlineExceeded):
		status, errText = streams.RunTimeout, runErr.Error()
	default:
		status, errText = streams.RunError, runErr.Error()
	}
	if status == streams.RunOK && !replied {
		data, _ := json.Marshal(map[string]any{
			"role":    "assistant",
			"content": reply,
			runMarker: marker{Run: req.RunID, Part: "reply"},
		})
		if _, err := g.tr.Append(octx, enc, data); err != nil {
			return nil, fmt.Errorf("append reply: %w", err)
		}
	}
	rec, _, err = g.runs.UpdateFrom(octx, req.RunID, rec, rev, func(r *streams.RunRecord) error {
		if r.Terminal() {
			return nil // killed meanwhile: keep that
		}
		r.Status = status
		r.Error = errText
		r.EndedAt = time.Now().UnixMilli()
		if status == streams.RunOK {
			r.Reply = sanitize.VisibleText(reply, sanitize.Delivery)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record outcome: %w", err)
	}
	return rec, nil
}

// runAgent runs the turn with its own deadline and identity token.
func (g *Gateway) runAgent(ctx context.Context, req *streams.RunRequest, history []json.RawMessage) (*runtime.Result, error) {
	secs := req.TimeoutSeconds
	if secs <= 0 {
		secs = DefaultTimeoutSeconds
	}
	timeout := time.Duration(secs) * time.Second
	token, err := g.op.Mint(bus.Caller{SessionKey: req.SessionKey, AgentID: req.AgentID, RunID: req.RunID}, timeout+time.Minute)
	if err != nil {
		return nil, &runtime.RunError{Message: "mint run token: " + err.Error()}
	}
	rt := g.runtimes[req.AgentID]
	if rt == nil {
		rt = g.echo
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tools := runtime.ToolsFunc(func(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error) {
		out, err := bus.Call(ctx, g.nc, g.names, token, tool, params)
		return out, err
	})
	turn := runtime.Turn{
		SessionKey: req.SessionKey, AgentID: req.AgentID, RunID: req.RunID,
		Message: req.Message, Prompt: req.Prompt, ExtraSystemPrompt: req.ExtraSystemPrompt,
		History: history, NATSURL: g.nc.ConnectedUrl(), Token: token,
		ToolsSubject: g.names.ToolsGroup(),
	}
	res, err := rt.Run(tctx, turn, tools)
	if err != nil && tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return res, &runtime.RunError{Message: fmt.Sprintf("run timed out after %ds", secs), Timeout: true}
	}
	return res, err
}

// touchSession creates the session entry if absent, else bumps UpdatedAt.
func (g *Gateway) touchSession(ctx context.Context, req *streams.RunRequest) error {
	now := time.Now().UnixMilli()
	_, err := g.store.Create(ctx, &kv.Entry{
		Key: req.SessionKey, AgentID: req.AgentID, SessionID: kv.NewSessionID(),
		CreatedAt: now, UpdatedAt: now,
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, kv.ErrExists) {
		return fmt.Errorf("create session: %w", err)
	}
	_, _, err = g.store.Update(ctx, req.SessionKey, func(e *kv.Entry) error {
		e.UpdatedAt = max(e.UpdatedAt, now)
		return nil
	})
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// hasPart reports whether entries hold part of runID.
func hasPart(entries []streams.Entry, runID, part string) bool {
	_, ok := findPart(entries, runID, part)
	return ok
}

// findPart returns the content of the entry this run appended as part.
func findPart(entries []streams.Entry, runID, part string) (string, bool) {
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
