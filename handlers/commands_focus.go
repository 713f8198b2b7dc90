package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/threadbindings"
	"github.com/sessionbus/sessionbus/rules/routing"
)

// /focus, /unfocus and /session idle|max-age: thread bindings by hand.
// /focus binds the message's conversation (its chat, or its thread) to one
// of the session's sub-agents, as a thread=true spawn binds it; the
// ingress then routes the conversation's messages there (inbound_route.go).
// The binding keeps the channel's threadBindings expiry; /session changes
// it; /unfocus removes it.

// commandConversation is the conversation a command came from, and the
// channel's binding policy; ok false when the channel has no threads or
// the message names no chat.
func (d *Deps) commandConversation(ip inboundParams) (threadbindings.Conversation, bool) {
	c := spawns.ConversationOf(ip.channel, ip.accountID, ip.to, ip.threadID)
	return c, c.To != "" || c.ThreadID != ""
}

func cmdFocus(ctx context.Context, d *Deps, ip inboundParams, args string) (string, error) {
	if args == "" {
		return focusUsage, nil
	}
	ch := strings.ToLower(ip.channel)
	if p := d.Config.ThreadBindingsFor(ch); !p.Enabled || routing.Threadless(ch) || d.ThreadBindings == nil {
		return bindingsUnavailable(ip.channel), nil
	}
	conv, ok := d.commandConversation(ip)
	if !ok {
		return focusNoConversation, nil
	}
	if _, err := d.commandSession(ctx, ip.sessionKey); err != nil {
		return "", err
	}
	r, err := d.commandRequester(ip.sessionKey)
	if err != nil {
		return "", err
	}
	c := &subagentsCall{d: d, ctl: d.subagentController(r), now: d.Now().UnixMilli(),
		recentMinutes: subagentsDefaultRecentMinutes, pending: map[string]int{}}
	if err := c.load(ctx); err != nil {
		return "", err
	}
	target, _ := c.resolveTarget(args)
	if target == nil {
		target = c.bySessionID(args)
	}
	if target == nil || c.checkControl(target) != nil {
		return focusUnresolved(args), nil
	}
	rec := target.rec
	policy := d.Config.ThreadBindingsFor(ch)
	now := d.Now().UnixMilli()
	b := &threadbindings.Binding{
		Conversation: conv, TargetSessionKey: rec.ChildSessionKey, TargetKind: "subagent",
		RequesterSessionKey: rec.RequesterSessionKey, RunID: "focus:" + commandOpID(ip), Mode: rec.SpawnMode,
		AgentID: rec.ChildAgentID, Label: rec.Label, BoundAt: now,
		IdleTimeoutMs: policy.IdleMs(), MaxAgeMs: policy.MaxAgeMs(),
	}
	// /focus refocuses a bound conversation, as OpenClaw's does
	if err := d.ThreadBindings.Bind(ctx, b, func(*threadbindings.Binding) bool { return true }); err != nil {
		d.Log.Warn("inbound: /focus could not bind the conversation", "session", ip.sessionKey, "target", rec.ChildSessionKey, "err", err)
		return focusBindFailed, nil
	}
	return focusBound(rec.ChildSessionKey), nil
}

// bySessionID is the child whose session id is id, if one is.
func (c *subagentsCall) bySessionID(id string) *child {
	id = strings.TrimSpace(id)
	for _, ch := range c.children {
		if id != "" && ch.rec.ChildSessionID == id {
			return ch
		}
	}
	return nil
}

func cmdUnfocus(ctx context.Context, d *Deps, ip inboundParams, _ string) (string, error) {
	if d.ThreadBindings == nil {
		return bindingsUnavailable(ip.channel), nil
	}
	conv, ok := d.commandConversation(ip)
	if !ok {
		return unfocusNoConversation, nil
	}
	b, rev, err := d.ThreadBindings.Get(ctx, conv)
	if errors.Is(err, threadbindings.ErrNotFound) {
		return unfocusNotFocused, nil
	}
	if err != nil {
		return "", err
	}
	if err := d.ThreadBindings.Remove(ctx, b, rev, b.TargetSessionKey); err != nil {
		return "", err
	}
	return unfocusDone, nil
}

// OpenClaw's /session duration: off words, or a duration whose bare
// number is hours.
var (
	sessionOffWords = map[string]bool{"off": true, "disable": true, "disabled": true, "none": true, "0": true}
	durationPart    = regexp.MustCompile(`^(\d+(?:\.\d+)?)(ms|s|m|h|d)?`)
)

// parseBindingDuration reads `24h`, `90m`, `1h30m`, `2` (hours) or an off
// word (0).
func parseBindingDuration(raw string) (time.Duration, bool) {
	raw = strings.ToLower(strings.TrimSpace(raw))
	if raw == "" {
		return 0, false
	}
	if sessionOffWords[raw] {
		return 0, true
	}
	units := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "": time.Hour}
	var total time.Duration
	for raw != "" {
		m := durationPart.FindStringSubmatch(raw)
		if m == nil {
			return 0, false
		}
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, false
		}
		total += time.Duration(n * float64(units[m[2]]))
		raw = raw[len(m[0]):]
	}
	return total, total > 0
}

func cmdSession(ctx context.Context, d *Deps, ip inboundParams, args string) (string, error) {
	action, rest := firstWord(strings.ToLower(args))
	if action != "idle" && action != "max-age" {
		return sessionUsage, nil
	}
	conv, ok := d.commandConversation(ip)
	if !ok || d.ThreadBindings == nil {
		return "⚠️ /session commands must be run inside a bindable conversation.", nil
	}
	b, rev, err := d.ThreadBindings.Get(ctx, conv)
	if errors.Is(err, threadbindings.ErrNotFound) {
		return sessionNotBound, nil
	}
	if err != nil {
		return "", err
	}
	idle := action == "idle"
	now := d.Now().UnixMilli()
	if rest == "" {
		if idle {
			if at := max(b.LastActivityAt, b.BoundAt) + b.IdleTimeoutMs; b.IdleTimeoutMs > 0 && at > now {
				return sessionIdleActive(b.IdleTimeoutMs, at), nil
			}
			return sessionIdleDisabled, nil
		}
		if at := b.BoundAt + b.MaxAgeMs; b.MaxAgeMs > 0 && at > now {
			return sessionMaxAgeActive(b.MaxAgeMs, at), nil
		}
		return sessionMaxAgeDisabled, nil
	}
	dur, ok := parseBindingDuration(strings.ReplaceAll(rest, " ", ""))
	if !ok {
		return sessionUsage, nil
	}
	next := *b
	if idle {
		next.IdleTimeoutMs = dur.Milliseconds()
	} else {
		next.MaxAgeMs = dur.Milliseconds()
	}
	data, err := json.Marshal(&next)
	if err == nil {
		_, err = d.ThreadBindings.KV().Update(ctx, b.Key(), data, rev)
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			// changed meanwhile: OpenClaw's answer, and the user retries
			d.Log.Info("inbound: /session found the binding changed meanwhile", "session", ip.sessionKey)
		} else {
			d.Log.Warn("inbound: /session could not update the binding", "session", ip.sessionKey, "err", err)
		}
		if idle {
			return sessionIdleFailed, nil
		}
		return sessionMaxAgeFailed, nil
	}
	switch {
	case dur <= 0 && idle:
		return sessionIdleOff(1), nil
	case dur <= 0:
		return sessionMaxAgeOff(1), nil
	case idle:
		return sessionIdleSet(next.IdleTimeoutMs, 1, max(next.LastActivityAt, next.BoundAt)+next.IdleTimeoutMs), nil
	}
	return sessionMaxAgeSet(next.MaxAgeMs, 1, next.BoundAt+next.MaxAgeMs), nil
}
