package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// sessions_send limits and defaults, OpenClaw's (docs/tools.md).
const (
	sendDefaultTimeoutSeconds = 30
	sendLabelMaxLength        = 512
	sendDefaultAnnounceMs     = 30_000
	sendLane                  = "nested"
	deliveryModeAnnounce      = "announce"
)

// OpenClaw's exact error strings for target selection.
const (
	errSendBothTargets     = "Provide either sessionKey or label (not both)."
	errSendNoTarget        = "Either sessionKey or label is required"
	errSendThreadTarget    = "sessions_send cannot target a thread session for inter-agent coordination. Use the parent channel session key instead."
	errSendSandboxLabel    = "Sandboxed sessions_send label lookup is limited to this agent"
	errSendA2ADisabled     = "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends."
	errSendA2ADenied       = "Agent-to-agent messaging denied by tools.agentToAgent.allow."
	errSendSandboxNotFound = "Session not visible from this sandboxed agent session."
	errSendAgentError      = "agent error"
	errSendRunTimeout      = "agent run timed out"
)

type sendDelivery = schema.SendDelivery

// sendResult is every result shape of sessions_send (docs/tools.md); runId is
// always present. Watched answers watch:true: whether the sender now
// watches the target; absent when watch was not asked.
type sendResult = schema.SessionsSendResult

func sendFail(runID, status, msg, displayKey string) *sendResult {
	return &sendResult{RunID: runID, Status: status, Error: msg, SessionKey: displayKey}
}

type sendParams struct {
	sessionKey, label, agentID, message, idempotencyKey string
	hasKey, hasLabel, hasAgent                          bool
	timeoutSeconds                                      int
	watch                                               bool
}

func readSendParams(p rules.Params) (sendParams, error) {
	var sp sendParams
	var err error
	if sp.message, err = p.RequiredString("message"); err != nil {
		return sp, err
	}
	if sp.sessionKey, sp.hasKey, err = p.String("sessionKey"); err != nil {
		return sp, err
	}
	if sp.hasKey {
		if err := rules.ValidateSessionKeyInput(sp.sessionKey); err != nil {
			return sp, err
		}
	}
	if sp.label, sp.hasLabel, err = p.String("label"); err != nil {
		return sp, err
	}
	if n := utf8.RuneCountInString(sp.label); n > sendLabelMaxLength {
		return sp, badRequest(fmt.Sprintf("label must be at most %d characters (got %d)", sendLabelMaxLength, n))
	}
	if sp.agentID, sp.hasAgent, err = p.AgentID("agentId"); err != nil {
		return sp, err
	}
	t, hasT, err := p.NonNegativeInt("timeoutSeconds")
	if err != nil {
		return sp, err
	}
	sp.timeoutSeconds = sendDefaultTimeoutSeconds
	if hasT {
		sp.timeoutSeconds = t
	}
	if sp.idempotencyKey, err = readIdempotencyKey(p); err != nil {
		return sp, err
	}
	if sp.watch, _, err = p.Bool("watch"); err != nil {
		return sp, err
	}
	return sp, nil
}

// idempotencyKeyMaxBytes bounds the idempotencyKey of sessions_send and
// sessions_spawn: it is hashed into ids, never stored whole in a subject.
const idempotencyKeyMaxBytes = 256

// readIdempotencyKey reads the optional idempotencyKey parameter.
func readIdempotencyKey(p rules.Params) (string, error) {
	key, _, err := p.String("idempotencyKey")
	if err != nil {
		return "", err
	}
	if n := len(key); n > idempotencyKeyMaxBytes {
		return "", badRequest(fmt.Sprintf("idempotencyKey must be at most %d bytes (got %d)", idempotencyKeyMaxBytes, n))
	}
	return key, nil
}

func sessionsSend(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error) {
	sp, err := readSendParams(p)
	if err != nil {
		return nil, err
	}
	earlyID := sessions.NewID()

	// Target selection, in OpenClaw's order.
	if sp.hasKey && sp.hasLabel {
		return sendFail(earlyID, "error", errSendBothTargets, ""), nil
	}
	ref := sp.sessionKey
	switch {
	case sp.hasKey:
	case sp.hasLabel:
		key, f := d.lookupLabel(ctx, r, sp.label, sp.agentID, sp.hasAgent)
		if f != nil {
			return sendFail(earlyID, f.Status, f.Error, ""), nil
		}
		ref = key
	case sp.hasAgent:
		if !agentConfigured(d.Config, sp.agentID) {
			return sendFail(earlyID, "error", "agent not found: "+sp.agentID, ""), nil
		}
		ref = r.alias.MainSessionKey(sp.agentID)
	default:
		return sendFail(earlyID, "error", errSendNoTarget, ""), nil
	}
	res, f := d.resolveSendTarget(ctx, r, ref)
	if f != nil {
		return f, nil
	}
	target := res.key

	// send policy (session.sendPolicy): enforced where the run is started, after target
	// resolution; the entry's override wins over config.
	var override, channel, chatType string
	if e := res.entry; e != nil {
		override, chatType = e.SendPolicy(), e.ChatType
		channel = rules.FirstNonEmpty(e.Channel, e.LastChannel)
	}
	if rules.ResolveSendPolicy(sendPolicy(d.Config.Session.SendPolicy), override, target, channel, chatType) == rules.SendDeny {
		return sendFail(earlyID, "error", rules.SendBlockedError, res.displayKey), nil
	}

	// loop protection: a send made from inside a run continues its chain.
	chainID, hop := sessions.NewID(), 0
	if r.runID != "" {
		chainID, hop = r.runID, 1
		if parent, _, err := d.Runs.Get(ctx, r.runID); err == nil {
			chainID, hop = rules.FirstNonEmpty(parent.ChainID, r.runID), parent.Hop+1
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("read caller run %s: %w", r.runID, err)
		}
	}
	maxHops := d.Config.Bus.MaxRunHops // validated ≥ 1 when the config loads
	if hop > maxHops {
		return sendFail(earlyID, rules.StatusForbidden, fmt.Sprintf(
			"agent-to-agent run chain %s is too long: this send would be hop %d, over bus.maxRunHops=%d; stop the exchange (or raise bus.maxRunHops)",
			chainID, hop, maxHops), res.displayKey), nil
	}

	runID := earlyID
	if sp.idempotencyKey != "" {
		runID = idempotentRunID(r.key, target, sp.idempotencyKey)
	}
	reqChannel := d.requesterChannel(r)
	skipA2A := res.entry != nil && (res.entry.SpawnedBy == r.key || res.entry.ParentSessionKey == r.key)
	now := d.Now().UnixMilli()
	req := &runqueue.Request{
		RunID:             runID,
		SessionKey:        target,
		AgentID:           res.k.AgentID,
		Message:           sp.message,
		Prompt:            rules.AnnotateInterSession(sp.message, r.key, reqChannel, sendToolName),
		ExtraSystemPrompt: a2aContextPrompt(r.key, reqChannel, res.displayKey),
		Provenance: &runqueue.Provenance{
			Kind: provenanceInterSession, SourceSessionKey: r.key, SourceChannel: reqChannel, SourceTool: sendToolName,
		},
		Lane:      sendLane,
		ChainID:   chainID,
		Hop:       hop,
		CreatedAt: now,
	}
	if !skipA2A {
		announceMs := int64(sendDefaultAnnounceMs)
		if sp.timeoutSeconds > 0 {
			announceMs = int64(sp.timeoutSeconds) * 1000
		}
		req.A2A = &runqueue.A2A{
			RequesterKey:      r.key,
			RequesterChannel:  reqChannel,
			TargetDisplayKey:  res.displayKey,
			OriginalMessage:   sp.message,
			MaxPingPongTurns:  pingPongTurns(d.Config, r.k),
			AnnounceTimeoutMs: announceMs,
		}
	}
	rec := &runs.Record{
		RunID: runID, SessionKey: target, AgentID: req.AgentID, Status: runs.Pending,
		CreatedAt: now, ChainID: chainID, Hop: hop, IdempotencyKey: sp.idempotencyKey,
	}
	if err := d.admitRun(r.key); err != nil {
		return nil, err
	}
	q, err := d.starter().Start(ctx, sendToolName, req, rec, sp.timeoutSeconds > 0)
	if err != nil {
		return sendFail(runID, "error", err.Error(), res.displayKey), nil
	}
	defer q.Stop()
	out := d.sendOutcome(ctx, q, sp, runID, res.displayKey, skipA2A)
	if sp.watch {
		// registered after a successful dispatch only (a failed one
		// returned above), as in OpenClaw
		watched := d.watch(ctx, r.key, target)
		out.Watched = &watched
	}
	return out, nil
}

// sendOutcome waits for the run as asked and states the result.
func (d *Deps) sendOutcome(ctx context.Context, q *submit.Queued, sp sendParams, runID, displayKey string, skipA2A bool) *sendResult {
	delivery := func(status string) *sendDelivery {
		if skipA2A {
			status = "skipped"
		}
		return &sendDelivery{Status: status, Mode: deliveryModeAnnounce}
	}
	if sp.timeoutSeconds == 0 {
		return &sendResult{RunID: runID, Status: "accepted", SessionKey: displayKey, Delivery: delivery("sent")}
	}
	last, err := q.Wait(ctx, time.Duration(sp.timeoutSeconds)*time.Second)
	if err != nil {
		return &sendResult{RunID: runID, Status: "error", Error: err.Error(), SessionKey: displayKey, SentBeforeError: true}
	}
	if last == nil {
		// soft timeout (PR #76484): the run goes on, a late reply is still
		// delivered by the A2A flow; or the worker's shutdown cut the wait
		// short: the run stays queued and completes without this worker.
		return &sendResult{RunID: runID, Status: "accepted", SessionKey: displayKey, Delivery: delivery("accepted")}
	}
	switch last.Status {
	case runs.OK:
		return &sendResult{RunID: runID, Status: "ok", Reply: last.Reply, SessionKey: displayKey, Delivery: delivery("delivered")}
	case runs.Timeout:
		return &sendResult{RunID: runID, Status: "timeout", Error: rules.FirstNonEmpty(last.Error, errSendRunTimeout), SessionKey: displayKey, SentBeforeError: true}
	default: // error, killed
		return &sendResult{RunID: runID, Status: "error", Error: rules.FirstNonEmpty(last.Error, errSendAgentError), SessionKey: displayKey, SentBeforeError: true}
	}
}

// watch registers watcher as an explicit watcher of target, seeded at the
// target's current head so its history never notifies (a re-registration
// keeps what is pending). Self-watch and keys that cannot watch (not
// agent-qualified) answer false, as does a store that fails (logged).
func (d *Deps) watch(ctx context.Context, watcher, target string) bool {
	if d.Watchers == nil || d.Notices == nil {
		return false
	}
	head, err := d.Notices.Log.StateVersion(ctx, target)
	if err == nil {
		_, err = d.Watchers.Seed(ctx, watcher, target, head, watchers.Explicit)
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, watchers.ErrSelfWatch), errors.Is(err, watchers.ErrNotQualified):
		return false
	}
	d.Log.Warn("sessions_send: registering the watch failed", "watcher", watcher, "target", target, "err", err)
	return false
}

// pingPongTurns is session.agentToAgent.maxPingPongTurns clamped to its
// range, and 0 for a cron requester: a cron job's session has no one to
// answer a reply step (OpenClaw forces zero ping-pong turns for
// isolated cron requesters), so its sends go straight to the announce step.
func pingPongTurns(cfg *config.Config, requester rules.Key) int {
	if requester.IsCron() {
		return 0
	}
	return min(max(cfg.Session.AgentToAgent.MaxPingPongTurns, 0), config.MaxPingPongTurnsLimit)
}

// resolveSendTarget is the last steps of target selection: reference resolution, sandbox
// check, thread rejection, visibility guard (action send). Like
// resolveVisible, a denial or miss is decided again after an index sync.
func (d *Deps) resolveSendTarget(ctx context.Context, r *requester, ref string) (resolved, *sendResult) {
	res, f := d.checkSendTarget(r, ref)
	if f == nil {
		return res, nil
	}
	if err := d.Index.Sync(ctx); err != nil {
		d.Log.Warn("session index sync", "err", err)
		return res, f
	}
	return d.checkSendTarget(r, ref)
}

func (d *Deps) checkSendTarget(r *requester, ref string) (resolved, *sendResult) {
	id := sessions.NewID()
	res, f := d.resolveReference(r, ref)
	if f != nil {
		return res, sendFail(id, f.Status, f.Error, "")
	}
	if f := d.checkSandboxSpawned(r, res, ref); f != nil {
		return res, sendFail(id, f.Status, f.Error, "")
	}
	if _, _, isThread := rules.ParseThreadSuffix(res.key); isThread {
		return res, sendFail(id, "error", errSendThreadTarget, res.displayKey)
	}
	if ok, status, msg := d.guard(r, rules.ActionSend).CheckAgent(res.key, res.k.AgentID); !ok {
		return res, sendFail(id, status, msg, res.displayKey)
	}
	return res, nil
}

// lookupLabel is the label step of target selection, sessions.resolve by label over the index:
// exact label, scoped to the requested agent (or the requester's), and to
// the requester's children when sandbox-restricted.
func (d *Deps) lookupLabel(ctx context.Context, r *requester, label, agentID string, hasAgent bool) (string, *failure) {
	requesterAgent := r.k.AgentID
	requested := requesterAgent
	if hasAgent {
		requested = agentID // validated and lower-cased by Params.AgentID
	}
	if r.restrictToSpawned && requested != requesterAgent {
		return "", fail(rules.StatusForbidden, errSendSandboxLabel)
	}
	if requested != requesterAgent {
		if !r.a2a.Enabled {
			return "", fail(rules.StatusForbidden, errSendA2ADisabled)
		}
		if !r.a2a.IsAllowed(requesterAgent, requested) {
			return "", fail(rules.StatusForbidden, errSendA2ADenied)
		}
	}
	find := func() (*sessions.Entry, bool) {
		var best *sessions.Entry
		tie := false
		d.Index.Each(func(e *sessions.Entry) bool {
			if e.Label != label || rules.AgentIDFromKey(e.Key) != requested {
				return true
			}
			if r.restrictToSpawned && !d.Index.IsChild(r.key, e.Key) {
				return true
			}
			switch {
			case best == nil || e.UpdatedAt > best.UpdatedAt:
				best, tie = e, false
			case e.UpdatedAt == best.UpdatedAt:
				tie = true
			}
			return true
		})
		return best, tie
	}
	e, tie := find()
	if e == nil {
		if err := d.Index.Sync(ctx); err != nil {
			d.Log.Warn("session index sync", "err", err)
		} else {
			e, tie = find()
		}
	}
	switch {
	case e == nil && r.restrictToSpawned:
		return "", fail(rules.StatusForbidden, errSendSandboxNotFound)
	case e == nil:
		return "", fail("error", "No session found with label: "+label)
	case tie:
		return "", fail("error", "Multiple sessions found with label: "+label+" (use sessionKey)")
	}
	return e.Key, nil
}

// agentConfigured reports whether agents.list names id; with no list, the
// default agent is the only one.
func agentConfigured(cfg *config.Config, id string) bool {
	if len(cfg.Agents.List) == 0 {
		return id == rules.DefaultAgentID
	}
	for _, a := range cfg.Agents.List {
		if rules.NormalizeAgentID(a.ID) == id {
			return true
		}
	}
	return false
}

// requesterChannel is the channel the caller's session talks on, from its
// store entry; empty when unknown (the provenance part is then omitted).
func (d *Deps) requesterChannel(r *requester) string {
	e := d.Index.Get(r.key)
	if e == nil {
		return ""
	}
	dc := ""
	if e.DeliveryContext != nil {
		dc = e.DeliveryContext.Channel
	}
	return rules.FirstNonEmpty(dc, e.LastChannel, e.Channel)
}

// idempotentRunID derives the run id of an idempotent send from (caller,
// target, key), formatted as a UUID (version 8, name-based).
func idempotentRunID(caller, target, key string) string {
	return bus.DerivedUUID("sessionbus/sessions_send", caller, target, key)
}

func sendPolicy(p *config.SendPolicy) *rules.SendPolicy { return rules.ConfigSendPolicy(p) }
