package handlers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// `/steer <message>` and its alias `/tell` (OpenClaw's tools/steer): the
// message goes into the session's running turn at its next boundary,
// whatever the session's queue mode, and the answer is OpenClaw's
// "steered current session.". With no turn running, or one that cannot
// be steered, the command word is dropped and the message goes on as a
// normal prompt. A bare /steer is answered its usage.

var steerCommandRe = regexp.MustCompile(`(?is)^/(?:steer|tell)(?:\s+(.*))?$`)

// parseSteerCommand reads a message whose text is /steer or /tell; msg is
// what follows the command word ("": none).
func parseSteerCommand(text string) (msg string, ok bool) {
	m := steerCommandRe.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

// inboundSteer answers /steer. done is false when no running turn took the
// message: the caller goes on with msg as a normal prompt.
func (d *Deps) inboundSteer(ctx context.Context, breq *bus.Request, ip inboundParams, msg string) (out *inboundResult, done bool, err error) {
	e, err := d.reachable(ctx, breq.Caller, ip.sessionKey)
	if err != nil || e == nil {
		return nil, err != nil, err // an unknown session: the normal path refuses it
	}
	opID := sessions.NewID()
	if ip.idempotencyKey != "" {
		opID = inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
	}
	answer := func(runID, text string) (*inboundResult, bool, error) {
		if err := d.deliverGoalAnswer(ctx, ip, opID, text); err != nil {
			d.Log.Warn("inbound: delivering the /steer answer failed", "session", ip.sessionKey, "err", err)
		}
		return &inboundResult{Status: "ok", RunID: runID, SessionKey: ip.sessionKey, Reply: text}, true, nil
	}
	if msg == "" {
		return answer(opID, config.SteerUsage)
	}
	active, part, err := d.activeTurn(ctx, ip.sessionKey)
	if err != nil || !d.steerable(active, part) {
		return nil, err != nil, err // a normal message: admitted as one
	}
	// a steered message counts against the session's runs as a turn does
	if err := d.admitRun(ip.sessionKey); err != nil {
		return nil, true, err
	}
	ip.text = msg
	agentID := rules.FirstNonEmpty(e.AgentID, rules.AgentIDFromKey(ip.sessionKey))
	req, _ := humanRun(ip, agentID, opID, d.Now().UnixMilli())
	took, err := d.steerInto(ctx, active.RunID, inboxMessage(req, config.QueueSteer), d.queueOf(e, ip.channel).Cap)
	if err != nil || !took {
		return nil, err != nil, err
	}
	return answer(active.RunID, config.SteeredText)
}

// reachable is the entry of session key when the caller may act on it: an
// adapter token for one channel reaches that channel's sessions only, as
// on the session ops. A missing session is nil with no error.
func (d *Deps) reachable(ctx context.Context, c bus.Caller, key string) (*sessions.Entry, error) {
	e, _, err := d.Store.Get(ctx, key)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", key, err)
	}
	if ch := sessionChannel(e); ch != "" && !c.AllowsChannel(ch) {
		return nil, bus.Errorf(bus.CodeForbidden,
			"this adapter token is for channel %q and session %s is on channel %q: only that channel's adapter, or an ops token (`sessionbus token --adapter '*'`), may change it",
			c.Adapter, key, ch)
	}
	return e, nil
}
