package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/gateway/completion"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// childOf returns the registry record of the child whose current run is
// runID, nil when the run is no child's current run (an ordinary run, or
// a child's run replaced by a steer). The in-memory index answers almost
// always; a record it has not applied yet (a spawn a moment ago) is read.
func (g *Gateway) childOf(ctx context.Context, key rules.Key, runID string) *subagents.Record {
	if !key.IsSubagent() {
		return nil
	}
	sessionKey := key.Raw
	if c := g.children.Get(sessionKey); c != nil && c.RunID == runID {
		return c
	}
	c, _, err := g.reg.Get(ctx, sessionKey)
	if err != nil || c.RunID != runID {
		return nil
	}
	return c
}

// childStarted records the child's run as started (the Started step of
// docs/subagents.md#lifecycle): StartedAt and DeadlineAt on the first start
// only, so a redelivery never moves the deadline. It returns the record as
// written.
func (g *Gateway) childStarted(ctx context.Context, c *subagents.Record) (*subagents.Record, error) {
	if c.StartedAt != 0 && c.Queued {
		return c, nil // a redelivery: nothing to write
	}
	now := time.Now().UnixMilli()
	first := false
	rec, err := g.reg.Update(ctx, c.ChildSessionKey, func(r *subagents.Record) error {
		first = false
		if r.RunID != c.RunID || (r.StartedAt != 0 && r.Queued) {
			return record.ErrUnchanged
		}
		if r.StartedAt == 0 {
			first = true
			r.StartedAt = now
			if r.RunTimeoutSeconds > 0 {
				r.DeadlineAt = now + int64(r.RunTimeoutSeconds)*1000
			}
		}
		r.Queued = true
		return nil
	})
	if err == nil && first {
		g.childSpawned(ctx, rec)
	}
	return rec, err
}

// childSpawned logs child_spawned on the child's signal log and seeds the
// requester's watch cursor at it (docs/signals.md): from now on a human
// turn into the child notifies the parent. Best effort, like every
// signal-log write.
func (g *Gateway) childSpawned(ctx context.Context, c *subagents.Record) {
	ev, err := g.recorder.Record(ctx, signals.Event{
		DedupeKey: "child-spawned:" + c.RunID, SessionKey: c.ChildSessionKey, SessionID: c.ChildSessionID,
		AgentID: c.ChildAgentID, Kind: signals.KindChildSpawned, ActorType: signals.ActorAgent,
		ActorID: c.RequesterSessionKey, RunID: c.RunID, OccurredAt: c.CreatedAt, Summary: "child session spawned",
	})
	if err == nil {
		_, err = g.watchers.Seed(ctx, c.RequesterSessionKey, c.ChildSessionKey, ev.Sequence, watchers.Implicit)
	}
	if err != nil && !errors.Is(err, watchers.ErrNotQualified) && !errors.Is(err, watchers.ErrSelfWatch) {
		g.log.Warn("gateway: child_spawned signal (the run goes on)", "child", c.ChildSessionKey, "err", err)
	}
}

// runEnded logs a child run's outcome on its signal log (log only: it
// notifies nobody; the completion announce tells the requester).
func (g *Gateway) runEnded(ctx context.Context, c *subagents.Record) {
	ev := signals.Event{
		DedupeKey: "run-terminal:" + c.RunID, SessionKey: c.ChildSessionKey, SessionID: c.ChildSessionID,
		AgentID: c.ChildAgentID, ActorType: signals.ActorSystem, RunID: c.RunID, OccurredAt: c.EndedAt,
		Kind: signals.KindRunFailed,
	}
	switch c.Outcome {
	case subagents.OutcomeOK:
		ev.Kind, ev.Summary = signals.KindRunCompleted, "child run completed"
	case subagents.OutcomeTimeout:
		ev.Summary, ev.Payload = "child run timed out", map[string]any{"outcome": signals.OutcomeTimeout}
	case subagents.OutcomeKilled:
		ev.Summary, ev.Payload = "child run cancelled", map[string]any{"outcome": signals.OutcomeCancelled}
	default:
		ev.Summary, ev.Payload = "child run failed", map[string]any{"outcome": signals.OutcomeError}
	}
	g.recordSignal(ctx, ev)
}

// deadline is when the child's current run times out; zero for none.
func deadline(c *subagents.Record) time.Time {
	if c == nil || c.DeadlineAt == 0 {
		return time.Time{}
	}
	return time.UnixMilli(c.DeadlineAt)
}

// expireRun ends a run past its deadline as timeout (compare-and-set: a
// run already terminal keeps its outcome) and returns its record.
func (g *Gateway) expireRun(ctx context.Context, runID string, secs int) (*runs.Record, error) {
	return g.runs.Update(ctx, runID, func(r *runs.Record) error {
		if r.Terminal() {
			return record.ErrUnchanged
		}
		r.Status, r.Error, r.EndedAt = runs.Timeout, fmt.Sprintf("run timed out after %ds", secs), time.Now().UnixMilli()
		return nil
	})
}

// childEnded finalizes the child's registry record once its run is
// terminal (the Ended step of docs/subagents.md#lifecycle) and publishes
// its completion announce. It is idempotent: the executing gateway's
// afterRun, a redelivery and every gateway's sweep may all call it; one
// registry write wins, and the announce's event id dedupes the publishes.
func (g *Gateway) childEnded(ctx context.Context, childKey string, rec *runs.Record) error {
	c := g.children.Get(childKey)
	if c == nil || c.RunID != rec.RunID || c.EndedAt == 0 {
		// not finalized as far as this gateway knows: decide on fresh state
		var err error
		if c, _, err = g.reg.Get(ctx, childKey); err != nil {
			if errors.Is(err, subagents.ErrNotFound) {
				return nil
			}
			return err
		}
	}
	if c.RunID != rec.RunID {
		return nil // steered: the old run announces nothing
	}
	if c.EndedAt == 0 {
		// the child's entry (token counts) and its result (silent?) are
		// read side by side: the announce waits on both
		var entry *sessions.Entry
		var silent bool
		var entryErr, resErr error
		var wg sync.WaitGroup
		wg.Go(func() { entry, _, entryErr = g.store.Get(ctx, childKey) })
		wg.Go(func() { _, silent, resErr = g.childResult(ctx, childKey) })
		wg.Wait()
		if entryErr != nil && !errors.Is(entryErr, sessions.ErrNotFound) {
			return entryErr
		}
		if resErr != nil {
			return resErr
		}
		now := time.Now().UnixMilli()
		var err error
		c, err = g.reg.Update(ctx, childKey, func(r *subagents.Record) error {
			if r.RunID != rec.RunID || r.EndedAt != 0 {
				return record.ErrUnchanged
			}
			r.EndedAt = rec.EndedAt
			if r.EndedAt == 0 {
				r.EndedAt = now
			}
			if r.StartedAt == 0 {
				r.StartedAt = rec.StartedAt
			}
			r.Outcome, r.Error = rec.Status, rec.Error
			if entry != nil {
				r.InputTokens, r.OutputTokens, r.TotalTokens = entry.InputTokens, entry.OutputTokens, entry.TotalTokens
				if r.ChildSessionID == "" {
					r.ChildSessionID = entry.SessionID
				}
			}
			state := subagents.AnnouncePending
			if silent {
				state = subagents.AnnounceSkipped
			}
			r.Announce = &subagents.Announce{State: state, At: now}
			return nil
		})
		if err != nil {
			return fmt.Errorf("finalize sub-agent %s: %w", childKey, err)
		}
		if c.RunID != rec.RunID {
			return nil
		}
		// log only, so after the announce is on its way: the signal log
		// append is a write of its own that the requester need not wait for
		defer g.runEnded(ctx, c)
	}
	if c.Announce == nil {
		return nil
	}
	switch c.Announce.State {
	case subagents.AnnouncePending:
		return g.publishAnnounce(ctx, c)
	case subagents.AnnounceSkipped, subagents.AnnounceDelivered:
		return g.cleanupChild(ctx, c)
	}
	return nil
}

// childResult is the child's result as the announce carries it: its
// latest visible assistant reply, else its latest tool result text, both
// sanitized; silent when that reply is exactly ANNOUNCE_SKIP or NO_REPLY.
func (g *Gateway) childResult(ctx context.Context, childKey string) (result string, silent bool, err error) {
	tail, _, err := g.tr.Tail(ctx, bus.EncodeKey(childKey), historyLimit, 0)
	if err != nil {
		return "", false, fmt.Errorf("read %s's transcript: %w", childKey, err)
	}
	tool := ""
	for i := len(tail) - 1; i >= 0; i-- {
		var m map[string]any
		if json.Unmarshal(tail[i].Data, &m) != nil {
			continue
		}
		switch m["role"] {
		case "assistant":
			if text := sanitize.ExtractAssistantText(m); text != "" {
				return text, completion.Silent(text), nil
			}
		case "tool", "toolResult":
			if tool == "" {
				tool = strings.TrimSpace(sanitize.VisibleText(contentText(m["content"]), sanitize.History))
			}
		}
	}
	return tool, false, nil
}

// contentText is the text of a message's content: a string, or its text
// blocks joined by newlines.
func contentText(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case map[string]any:
		s, _ := c["text"].(string)
		return s
	case []any:
		var parts []string
		for _, b := range c {
			if m, ok := b.(map[string]any); ok {
				if s, ok := m["text"].(string); ok && s != "" {
					parts = append(parts, s)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// AnnounceRunID is the run that carries a child run's completion announce
// into the requester: fixed per child run, so it runs at most once.
func AnnounceRunID(childRunID string) string { return childRunID + ".announce" }

// carrierRunID is the id of the n-th run that carries a child run's
// announce (Announce.Carrier): AnnounceRunID for the first. A later one
// is queued only once the one before ended without carrying it.
func carrierRunID(childRunID string, n int) string {
	if n == 0 {
		return AnnounceRunID(childRunID)
	}
	return fmt.Sprintf("%s.announce.%d", childRunID, n)
}

// announceClaim is the claims key of a child run's announce on its n-th
// carrier: a claim finished by queuing a carrier that then ended without
// carrying the announce must not keep the next carrier from being queued.
func announceClaim(childRunID string, carrier int) string {
	if carrier == 0 {
		return "announce." + childRunID
	}
	return fmt.Sprintf("announce.%s.%d", childRunID, carrier)
}

// cleanupChild removes a child spawned with cleanup "delete" once its
// announce is delivered (or skipped): its transcript is archived, then its
// session goes (removeChild); the registry record stays, marked Deleted.
func (g *Gateway) cleanupChild(ctx context.Context, c *subagents.Record) error {
	if c.Cleanup != "delete" || c.Deleted {
		return nil
	}
	return g.removeChild(ctx, c, archives.ReasonDeleted)
}

// announceCarried marks the child's announce delivered: the run carrying
// it recorded its prompt in the requester's transcript. Idempotent.
func (g *Gateway) announceCarried(ctx context.Context, req *runqueue.Request) error {
	ref := req.Announce
	if c := g.children.Get(ref.ChildSessionKey); c != nil && c.RunID == ref.ChildRunID && c.Announce != nil &&
		c.Announce.State == subagents.AnnounceDelivered && (c.Cleanup != "delete" || c.Deleted) {
		return nil // done, as far as this gateway knows
	}
	now := time.Now().UnixMilli()
	c, err := g.reg.Update(ctx, ref.ChildSessionKey, func(r *subagents.Record) error {
		if r.RunID != ref.ChildRunID || r.Announce == nil || r.Announce.State == subagents.AnnounceDelivered {
			return record.ErrUnchanged
		}
		a := *r.Announce
		a.State, a.Error, a.DeliveryRun, a.TargetKey, a.At = subagents.AnnounceDelivered, "", req.RunID, req.SessionKey, now
		if a.Gateway == "" {
			// the carrying run was quicker than its claimant's "queued"
			// mark: the gateway that ran it is the one that delivered
			a.Gateway = g.id
		}
		r.Announce = &a
		return nil
	})
	if errors.Is(err, subagents.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record announce delivered for %s: %w", ref.ChildSessionKey, err)
	}
	if c.RunID == ref.ChildRunID {
		return g.cleanupChild(ctx, c)
	}
	return nil
}

// childRecord is the registry record of the sub-agent whose current run r
// is (childOf), nil for any other run: read once per run, for its slot and
// its start (a new child is often not in the index yet, and each miss is a
// registry read).
func (r *run) childRecord(ctx context.Context) *subagents.Record {
	octx, cancel := opCtx(ctx)
	defer cancel()
	return r.g.childOf(octx, r.key, r.req.RunID)
}

// startChild is the Started step of docs/subagents.md#lifecycle for a
// sub-agent's current run (c, from childRecord; nil for any other run): record its start (and deadline) on the registry
// record, end it as timeout without running when it is taken after its
// deadline (r.rec is then terminal), and watch its run record so a kill or
// a sweep's timeout cancels the turn.
func (r *run) startChild(ctx context.Context, c *subagents.Record) error {
	g := r.g
	octx, cancel := opCtx(ctx)
	defer cancel()
	if c == nil {
		return g.spawnRegistered(octx, r.req, r.key)
	}
	c, err := g.childStarted(octx, c)
	if err != nil {
		return fmt.Errorf("record sub-agent start: %w", err)
	}
	if c.RunID != r.req.RunID {
		return nil // steered meanwhile
	}
	r.child = c
	if d := deadline(c); !d.IsZero() && !time.Now().Before(d) {
		rec, err := g.expireRun(octx, r.req.RunID, c.RunTimeoutSeconds)
		if err != nil {
			return fmt.Errorf("record timeout: %w", err)
		}
		r.rec = rec
		return nil
	}
	if r.watch, err = g.runs.Watch(r.req.RunID); err != nil {
		return fmt.Errorf("watch run record: %w", err)
	}
	return nil
}

// spawnRegistered refuses a spawn's run whose child has no registry
// record. sessions_spawn sends the record, the entry, the run record and
// the run request in one wave (see run); if the server refused the record
// (the commit point), the rest may have landed, and the worker ends the run
// before anyone takes it, but a gateway can be faster. Such a run must not
// go ahead without its child record (nothing would finalize or announce
// it): the error retries it later (the record may only be a moment behind,
// being written to another stream) and after MaxRunFailures attempts it is
// recorded failed, never run. A steered child (a record with another run
// id) is no spawn's first run and runs as an ordinary run, as before.
func (g *Gateway) spawnRegistered(ctx context.Context, req *runqueue.Request, key rules.Key) error {
	if !key.IsSubagent() || req.Provenance == nil || req.Provenance.SourceTool != spawnTool {
		return nil
	}
	if _, _, err := g.reg.Get(ctx, req.SessionKey); !errors.Is(err, subagents.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("sub-agent run %s of %s has no registry record: its spawn was not registered", req.RunID, req.SessionKey)
}

// spawnTool is the tool whose runs are a child's first run.
const spawnTool = "sessions_spawn"

// afterChildRun is what a finished run means for sub-agents: a run that
// carried an announce marks it delivered, a child's run finalizes its
// registry record and announces, and a run with a route delivers its reply.
func (g *Gateway) afterChildRun(ctx context.Context, req *runqueue.Request, rec *runs.Record) error {
	octx, cancel := opCtx(ctx)
	defer cancel()
	var errs []error
	if req.Announce != nil && rec.TranscriptAt != nil {
		errs = append(errs, g.announceCarried(octx, req))
	}
	if rules.IsSubagentKey(req.SessionKey) {
		errs = append(errs, g.childEnded(octx, req.SessionKey, rec))
	}
	if req.ReplyTo != nil {
		errs = append(errs, g.deliverReply(octx, req, rec))
	}
	if req.Notice != nil && rec.TranscriptAt != nil {
		// the notice is in the watcher's transcript: drained
		n := req.Notice
		errs = append(errs, g.ackNotice(octx, notices.Body{Watcher: n.Watcher, Target: n.Target, LastSeenSequence: n.LastSeenSequence}))
	}
	return errors.Join(errs...)
}
