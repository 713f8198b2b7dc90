package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/gateway/completion"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/events"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// announceLease is how long a gateway holds an announce's claim while it
// queues the run that carries it: should it die, the claim expires and a
// sweep anywhere delivers the announce.
const announceLease = 30 * time.Second

// maxFallbackHops bounds the walk up from a gone nested requester.
const maxFallbackHops = 8

// announceBody is the body of an announce event on SB_EVENTS.
type announceBody struct {
	ChildSessionKey string `json:"childSessionKey"`
	ChildRunID      string `json:"childRunId"`
}

// publishAnnounce puts the child's announce on its requester's subject,
// sb.session.<requester>.announce, for every gateway to receive.
func (g *Gateway) publishAnnounce(ctx context.Context, c *subagents.Record) error {
	body, _ := json.Marshal(announceBody{ChildSessionKey: c.ChildSessionKey, ChildRunID: c.RunID})
	return g.events.Publish(ctx, &events.Event{
		Kind: events.KindAnnounce, ID: "announce:" + c.RunID, SessionKey: c.RequesterSessionKey, Body: body,
	})
}

// onAnnounce is every gateway's handler of announce events: each tries to
// deliver, the claim picks one.
func (g *Gateway) onAnnounce(ev *events.Event) {
	var b announceBody
	if err := json.Unmarshal(ev.Body, &b); err != nil || b.ChildSessionKey == "" || b.ChildRunID == "" {
		g.log.Warn("gateway: skipping a malformed announce event", "id", ev.ID)
		return
	}
	g.wg.Go(func() {
		ctx, cancel := opCtx(g.ctx)
		defer cancel()
		if err := g.deliverAnnounce(ctx, b.ChildSessionKey, b.ChildRunID); err != nil && g.ctx.Err() == nil {
			g.log.Warn("gateway: announce delivery failed; a sweep retries it", "child", b.ChildSessionKey, "run", b.ChildRunID, "err", err)
		}
	})
}

// deliverAnnounce queues the run that carries a pending announce into its
// requester, if this gateway wins the claim. The carrying run's id is fixed
// per child run and it is submitted only when it has no record yet, so
// however many gateways and sweeps get here, the requester sees the
// announce once. A failure releases the claim and counts an attempt;
// after bus.announceRetries the announce is recorded failed.
func (g *Gateway) deliverAnnounce(ctx context.Context, childKey, childRunID string) error {
	c, _, err := g.reg.Get(ctx, childKey)
	if errors.Is(err, subagents.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.RunID != childRunID || c.Announce == nil || c.Announce.State != subagents.AnnouncePending {
		return nil
	}
	key := announceClaim(childRunID, c.Announce.Carrier)
	rev, err := g.claims.Take(ctx, key, g.id, announceLease)
	if errors.Is(err, claims.ErrTaken) {
		return nil
	}
	if err != nil {
		return err
	}
	target, req, err := g.announceRun(ctx, c)
	if err == nil {
		err = g.submitOnce(ctx, req)
	}
	if err != nil {
		g.opts.Observer.Delivered("announce", err)
		_ = g.claims.Release(context.WithoutCancel(ctx), key, rev)
		return g.announceFailed(ctx, c, err)
	}
	g.opts.Observer.Delivered("announce", nil)
	now := time.Now().UnixMilli()
	if _, err := g.reg.Update(ctx, childKey, func(r *subagents.Record) error {
		if r.RunID != childRunID || r.Announce == nil || r.Announce.State != subagents.AnnouncePending {
			return record.ErrUnchanged // delivered already, by a quick run
		}
		a := *r.Announce
		a.State, a.Error, a.Attempts, a.Gateway, a.TargetKey, a.DeliveryRun, a.At =
			subagents.AnnounceQueued, "", a.Attempts+1, g.id, target, req.RunID, now
		r.Announce = &a
		return nil
	}); err != nil {
		// the run is queued: it records delivered itself; the claim's
		// lease lets a sweep see to the rest
		return fmt.Errorf("record announce queued: %w", err)
	}
	return g.claims.Finish(ctx, key, g.id, rev)
}

// errCarrierEnded says the run meant to carry an announce ended without
// carrying it: the next attempt queues another (Announce.Carrier).
var errCarrierEnded = errors.New("the run carrying the announce ended before the announce was in the requester's transcript")

// submitOnce queues the carrying run. A delivery that got this far before
// (its gateway died before recording the announce queued, or its publish
// failed: the record stays pending, submit.Retried) left the run's record:
// a run that a gateway took is not queued again; a pending one is
// published again inside the dedupe window, where the queue drops it by
// run id should the first publish have landed. A record that ended without
// the announce in the transcript (the run failed before it started) is
// never run again: errCarrierEnded, and the next attempt uses the next
// carrier.
func (g *Gateway) submitOnce(ctx context.Context, req *runqueue.Request) error {
	rec, _, err := g.runs.Get(ctx, req.RunID)
	switch {
	case err == nil:
		if rec.Terminal() && rec.TranscriptAt == nil {
			return fmt.Errorf("%w: run %s: %s", errCarrierEnded, rec.RunID, rec.Error)
		}
		if rec.Status != runs.Pending {
			return nil
		}
		if age := time.Since(time.UnixMilli(rec.CreatedAt)); age > runqueue.DedupeWindow-time.Minute {
			// a publish now could queue it twice, should the first one be
			// waiting behind a busy session: leave it to that one
			g.log.Warn("gateway: an announce's carrying run has been pending past the queue's dedupe window; not publishing it again", "run", req.RunID, "age", age)
			return nil
		}
		req.Recorded = true
		return g.queue.Publish(ctx, req)
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return err
	}
	return submit.Retried(ctx, g.queue, g.runs, req, newRecord(req))
}

// announceFailed counts a failed delivery attempt on the child's record,
// and gives up (state failed, with the reason) after announceRetries.
func (g *Gateway) announceFailed(ctx context.Context, c *subagents.Record, cause error) error {
	now := time.Now().UnixMilli()
	_, err := g.reg.Update(context.WithoutCancel(ctx), c.ChildSessionKey, func(r *subagents.Record) error {
		if r.RunID != c.RunID || r.Announce == nil || r.Announce.State != subagents.AnnouncePending {
			return record.ErrUnchanged
		}
		a := *r.Announce
		a.Attempts++
		a.Error, a.At = cause.Error(), now
		if errors.Is(cause, errCarrierEnded) {
			a.Carrier++
		}
		g.giveUpAfterRetries(&a, cause)
		r.Announce = &a
		return nil
	})
	return errors.Join(cause, err)
}

// announceTarget is the session the announce goes to: the requester, or,
// when the requester is a sub-agent that is gone (no session entry, or
// deleted), its own requester, and so on up.
func (g *Gateway) announceTarget(ctx context.Context, c *subagents.Record) (string, *sessions.Entry, error) {
	key := c.RequesterSessionKey
	for range maxFallbackHops {
		e, _, err := g.store.Get(ctx, key)
		if err != nil && !errors.Is(err, sessions.ErrNotFound) {
			return "", nil, err
		}
		if !rules.IsSubagentKey(key) {
			return key, e, nil // a top-level requester is woken even without an entry
		}
		parent, _, perr := g.reg.Get(ctx, key)
		if perr != nil && !errors.Is(perr, subagents.ErrNotFound) {
			return "", nil, perr
		}
		gone := e == nil || (parent != nil && parent.Deleted)
		if !gone || parent == nil || parent.RequesterSessionKey == "" {
			return key, e, nil
		}
		g.log.Info("gateway: announce requester is gone; falling back to its requester", "child", c.ChildSessionKey, "gone", key, "to", parent.RequesterSessionKey)
		key = parent.RequesterSessionKey
	}
	return key, nil, nil
}

// announceRun builds the run that carries c's announce into its target.
func (g *Gateway) announceRun(ctx context.Context, c *subagents.Record) (string, *runqueue.Request, error) {
	// the target and the child's result are independent reads: side by side
	var target, result string
	var entry *sessions.Entry
	var targetErr, resErr error
	var wg sync.WaitGroup
	wg.Go(func() { target, entry, targetErr = g.announceTarget(ctx, c) })
	wg.Go(func() { result, _, resErr = g.childResult(ctx, c.ChildSessionKey) })
	wg.Wait()
	if err := errors.Join(targetErr, resErr); err != nil {
		return "", nil, err
	}
	sid, model := c.ChildSessionID, c.Model
	if sid == "" || model == "" {
		if ce, _, err := g.store.Get(ctx, c.ChildSessionKey); err == nil {
			sid = rules.FirstNonEmpty(sid, ce.SessionID)
			if model == "" && ce.Model != "" {
				model = ce.Model
				if ce.ModelProvider != "" {
					model = ce.ModelProvider + "/" + ce.Model
				}
			}
		}
	}
	nested := rules.IsSubagentKey(target)
	ev := &completion.Event{
		Source: "subagent", Type: completion.TypeSubagent,
		ChildSessionKey: c.ChildSessionKey, ChildSessionID: sid, Label: c.Label, Task: c.Task,
		Outcome: c.Outcome, Error: c.Error, Result: result,
		StartedAt: c.StartedAt, EndedAt: c.EndedAt,
		InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, TotalTokens: c.TotalTokens,
		TranscriptPath:      g.names.TranscriptsStream() + "/" + g.names.Transcript(bus.EncodeKey(c.ChildSessionKey)),
		RequesterIsSubagent: nested, ExpectsCompletion: c.ExpectsCompletion,
	}
	// the stats line's estimate, at the catalog's prices of the child's model
	if price := g.cfg.ModelLimits(model).Cost; model != "" && price.Priced() {
		ev.Priced, ev.CostUSD = true, completion.EstimateCost(c.InputTokens, c.OutputTokens, price.Input, price.Output)
	}
	text := completion.Text(ev)
	carrier := 0
	if c.Announce != nil {
		carrier = c.Announce.Carrier
	}
	req := &runqueue.Request{
		RunID: carrierRunID(c.RunID, carrier), SessionKey: target, AgentID: rules.AgentIDFromKey(target),
		Message: text, Prompt: text,
		Provenance: &runqueue.Provenance{Kind: "internal_system", SourceSessionKey: c.ChildSessionKey, SourceTool: "subagent_announce"},
		ChainID:    c.RunID, CreatedAt: time.Now().UnixMilli(),
		Announce: &runqueue.AnnounceRef{ChildSessionKey: c.ChildSessionKey, ChildRunID: c.RunID},
	}
	if !nested {
		req.ReplyTo = announceRoute(target, entry, c.RequesterOrigin)
	}
	return target, req, nil
}

// announceRoute is where a top-level requester's reply to an announce is
// delivered: the route captured at spawn when it is complete, else the
// requester's stored route (delivery context, lastChannel/lastTo), thread
// or topic kept; nil when there is none.
func announceRoute(key string, e *sessions.Entry, origin *subagents.Origin) *runqueue.Route {
	if origin != nil && origin.Channel != "" && origin.To != "" {
		return &runqueue.Route{Channel: origin.Channel, To: origin.To, AccountID: origin.AccountID, ThreadID: origin.ThreadID}
	}
	t := ResolveAnnounceTarget(key, e)
	if t == nil || t.Channel == "" || t.To == "" {
		return nil
	}
	if origin != nil && t.ThreadID == "" {
		t.ThreadID = origin.ThreadID
	}
	return &runqueue.Route{Channel: t.Channel, To: t.To, AccountID: t.AccountID, ThreadID: t.ThreadID}
}

// carrierEnded puts an announce whose carrying run ended without carrying
// it (rec: that run's terminal record, with no transcript position) back
// to pending with the next carrier, or failed after announceRetries
// attempts, and delivers it again. Without it such an announce stayed
// "queued" for good: nothing else would ever look at it.
func (g *Gateway) carrierEnded(ctx context.Context, c *subagents.Record, rec *runs.Record) error {
	now := time.Now().UnixMilli()
	cause := fmt.Errorf("%w: run %s: %s", errCarrierEnded, rec.RunID, rec.Error)
	cur, err := g.reg.Update(ctx, c.ChildSessionKey, func(r *subagents.Record) error {
		if r.RunID != c.RunID || r.Announce == nil || r.Announce.State != subagents.AnnounceQueued || r.Announce.DeliveryRun != rec.RunID {
			return record.ErrUnchanged
		}
		a := *r.Announce
		a.State, a.Carrier, a.Error, a.At = subagents.AnnouncePending, a.Carrier+1, cause.Error(), now
		g.giveUpAfterRetries(&a, cause)
		r.Announce = &a
		return nil
	})
	if err != nil {
		return fmt.Errorf("record announce pending again for %s: %w", c.ChildSessionKey, err)
	}
	if cur.RunID != c.RunID || cur.Announce == nil || cur.Announce.State != subagents.AnnouncePending {
		return nil
	}
	g.log.Warn("gateway: an announce's carrying run ended without carrying it; queuing another", "child", c.ChildSessionKey, "ended", rec.RunID, "err", rec.Error)
	return g.deliverAnnounce(ctx, c.ChildSessionKey, c.RunID)
}

// giveUpAfterRetries records an announce failed, with the reason, once it
// has used its bus.announceRetries attempts.
func (g *Gateway) giveUpAfterRetries(a *subagents.Announce, cause error) {
	if a.Attempts >= g.announceRetries {
		a.State = subagents.AnnounceFailed
		a.Error = fmt.Sprintf("gave up after %d attempts: %v", a.Attempts, cause)
	}
}
