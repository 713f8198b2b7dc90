package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// WithClock replaces the worker's clock (the ingress's reset policy, the
// lifecycle's timestamps): tests move time instead of waiting for it.
func WithClock(now func() time.Time) WorkerOption {
	return func(d *Deps) {
		d.Now = now
		if d.Lifecycle != nil {
			d.Lifecycle.Now = now
		}
	}
}

// resetCommand is a human message that starts with a reset trigger
// (session.resetTriggers, OpenClaw's /new and /reset).
type resetCommand struct {
	trigger string
	rest    string // the text after it: a model for /new, then a message
}

// parseResetCommand reads a message whose first word is a reset trigger
// (case-insensitive); "/newer" or "/new-thing" are ordinary messages.
func parseResetCommand(text string, triggers []string) (resetCommand, bool) {
	t := strings.TrimSpace(text)
	word, rest := t, ""
	if i := strings.IndexFunc(t, unicode.IsSpace); i >= 0 {
		word, rest = t[:i], strings.TrimSpace(t[i:])
	}
	for _, tr := range triggers {
		if strings.EqualFold(word, strings.TrimSpace(tr)) {
			return resetCommand{trigger: strings.ToLower(word), rest: rest}, true
		}
	}
	return resetCommand{}, false
}

// newModel takes the model `/new <model>` names off rest: an alias, or a
// provider/model ref. A first word that is neither is the message's.
func (d *Deps) newModel(cmd *resetCommand, agentID string, e *sessions.Entry) (provider, model string, err error) {
	if cmd.trigger != "/new" || cmd.rest == "" {
		return "", "", nil
	}
	word, rest := cmd.rest, ""
	if i := strings.IndexFunc(word, unicode.IsSpace); i >= 0 {
		word, rest = word[:i], strings.TrimSpace(word[i:])
	}
	if _, alias := d.Config.ModelAlias(word); !alias && !strings.Contains(word, "/") {
		return "", "", nil
	}
	if provider, model, err = d.resolveModelParam(agentID, e, word); err != nil {
		return "", "", err
	}
	cmd.rest = rest
	return provider, model, nil
}

// inboundReset answers /new and /reset: the session's transcript is
// archived (reason reset) and it starts over under a new sessionId,
// keeping its settings; `/new <model>` also sets its model. Text after
// the command goes on as the new session's first message; alone, the
// command is answered on the channel and queues no run. A retried command
// (same idempotency key) does not reset twice.
func (d *Deps) inboundReset(ctx context.Context, ip inboundParams, cmd resetCommand) (*inboundResult, error) {
	if d.Lifecycle == nil {
		return nil, bus.Errorf(bus.CodeUnavailable, "%s: this worker runs without session lifecycle operations", cmd.trigger)
	}
	e, _, err := d.Store.Get(ctx, ip.sessionKey)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, bus.Errorf(bus.CodeNotFound, "unknown session %s: %s resets an existing session; check the key (sessions_list shows them)", ip.sessionKey, cmd.trigger)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", ip.sessionKey, err)
	}
	agentID := e.AgentID
	provider, model, err := d.newModel(&cmd, agentID, e)
	if err != nil {
		return nil, err
	}
	opID := sessions.NewID()
	repeat := false
	if ip.idempotencyKey != "" {
		opID = inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
		if d.Claims != nil {
			_, err := d.Claims.Take(ctx, "reset-command."+opID, ip.from, claims.MaxAge)
			if repeat = errors.Is(err, claims.ErrTaken); err != nil && !repeat {
				return nil, err
			}
		}
	}
	newID := e.SessionID
	if !repeat {
		res, err := d.Lifecycle.Reset(ctx, ip.sessionKey, nil)
		if err != nil {
			return nil, err
		}
		newID = res.NewSessionID
		d.Log.Info("inbound: session reset by command", "session", ip.sessionKey, "command", cmd.trigger, "sessionId", res.SessionID, "newSessionId", newID, "archive", res.ArchiveID)
	}
	// as OpenClaw's /new: the thinking level returns to the configured
	// default, the model override stays unless the command names one
	if _, _, err := d.Store.Update(ctx, ip.sessionKey, func(x *sessions.Entry) error {
		r := x.Rares()
		if x.SessionID != newID || (r.ThinkingLevel == "" && (model == "" || (r.ProviderOverride == provider && r.ModelOverride == model))) {
			return record.ErrUnchanged
		}
		x.SetRare(func(r *sessions.RareFields) {
			r.ThinkingLevel = ""
			if model != "" {
				r.ProviderOverride, r.ModelOverride = provider, model
			}
		})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("set the new session of %s: %w", ip.sessionKey, err)
	}
	if cmd.rest != "" {
		ip.text = cmd.rest
		if err := d.admitRun(ip.sessionKey); err != nil {
			return nil, err
		}
		return d.inbound(ctx, ip)
	}
	text := "✅ New session started · sessionId " + newID
	if model != "" {
		text += " · model " + provider + "/" + model
	}
	if err := d.deliverGoalAnswer(ctx, ip, opID, text); err != nil {
		d.Log.Warn("inbound: delivering the reset answer failed", "session", ip.sessionKey, "err", err)
	}
	return &inboundResult{Status: "ok", RunID: opID, SessionKey: ip.sessionKey, Reply: text, Repeat: repeat}, nil
}

// expireStale resets the session a human message is for when its reset
// policy (session.reset, resetByType, resetByChannel) expired it: the
// message then starts the new sessionId. The in-memory index decides
// cheaply; ResetStale rechecks under the session's lock, so a message
// reaching two workers at once resets once.
func (d *Deps) expireStale(ctx context.Context, ip inboundParams) error {
	if d.Lifecycle == nil || d.Index == nil {
		return nil
	}
	e := d.Index.Get(ip.sessionKey)
	if e == nil {
		return nil // unknown here: the ingress refuses or creates it
	}
	p := lifecycle.PolicyFor(&d.Config.Session, lifecycle.ResetType(ip.sessionKey, ip.threadID, e.ChatType), ip.channel)
	why := p.Staleness(e, d.Now())
	if why == "" {
		return nil
	}
	res, err := d.Lifecycle.ResetStale(ctx, ip.sessionKey, e.SessionID)
	if err != nil {
		// the reset's steps are idempotent and a gateway sweep finishes a
		// half-done one: the adapter retries the message (same
		// idempotencyKey) and it runs in the new session
		d.Log.Warn("inbound: the reset of an expired session failed", "session", ip.sessionKey, "policy", why, "err", err)
		return bus.Errorf(bus.CodeUnavailable, "session %s expired (%s reset) and its reset did not finish: retry the message; nothing of it was queued", ip.sessionKey, why)
	}
	if res != nil {
		d.Log.Info("inbound: session expired; reset", "session", ip.sessionKey, "policy", why, "sessionId", res.SessionID,
			"newSessionId", res.NewSessionID, "archive", res.ArchiveID, "entries", res.Entries)
	}
	return nil
}
