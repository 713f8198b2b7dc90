package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/threadbindings"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/routing"
)

// An inbound message without a session key is routed: the worker derives
// the key from where the message came from, as OpenClaw does (package
// routing), and a key seen for the first time gets its session created
// before the turn is queued.

// routeParams reads the fields only a routed message has (chatType, groupId,
// agentId) into ip.
func readRouteParams(p rules.Params, ip *inboundParams) error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"chatType", &ip.chatType}, {"groupId", &ip.groupID}, {"agentId", &ip.agentID}} {
		v, _, err := p.String(f.name)
		if err != nil {
			return err
		}
		if err := checkInboundID(f.name, v); err != nil {
			return err
		}
		*f.v = v
	}
	return nil
}

// routeInbound derives the session key of a message that names none and
// fills ip.sessionKey and ip.route: the child its conversation is bound to
// (routeBound), else the key OpenClaw's rules give.
func (d *Deps) routeInbound(ctx context.Context, ip *inboundParams) error {
	if ip.sessionKey != "" {
		return nil
	}
	r, err := d.routes().Resolve(routing.Message{
		Channel: ip.channel, AccountID: ip.accountID, From: ip.from, ChatType: ip.chatType,
		GroupID: ip.groupID, ThreadID: ip.threadID, AgentID: ip.agentID,
	})
	if err != nil {
		return err
	}
	ip.sessionKey, ip.route = r.SessionKey, &r
	return d.routeBound(ctx, ip, r.AccountID)
}

// bindingTouchEvery is how stale a binding's idle clock may get before a
// message moves it: idleHours counts hours, so one write a minute keeps it
// exact enough and spares a write per message.
const bindingTouchEvery = time.Minute

// routeBound sends a message from a bound conversation to the child bound
// there (a sub-agent spawned with thread=true) instead of its routed key:
// one get on the threadbindings bucket, from any worker. A binding that
// ended (its child killed, deleted or archived, or past idleHours or
// maxAgeHours) is removed and the message keeps its routed key. The
// child's session exists, so nothing is created for it; its reply goes
// back to the thread the message came from, as every routed reply does.
func (d *Deps) routeBound(ctx context.Context, ip *inboundParams, account string) error {
	if d.ThreadBindings == nil {
		return nil
	}
	c := spawns.ConversationOf(ip.channel, account, ip.to, ip.threadID)
	b, rev, err := d.ThreadBindings.Get(ctx, c)
	if errors.Is(err, threadbindings.ErrNotFound) {
		return nil
	}
	if err != nil {
		// routing it by the rules could split the thread's conversation
		return fmt.Errorf("route the message: %w", err)
	}
	if !d.bindingLive(ctx, b, false) {
		if err := d.ThreadBindings.Remove(ctx, b, rev, b.TargetSessionKey); err != nil {
			d.Log.Warn("inbound: remove an ended thread binding", "child", b.TargetSessionKey, "err", err)
		}
		return nil
	}
	ip.sessionKey, ip.route = b.TargetSessionKey, nil
	now := d.Now().UnixMilli()
	if b.IdleTimeoutMs > 0 && now-max(b.LastActivityAt, b.BoundAt) >= bindingTouchEvery.Milliseconds() {
		if err := d.ThreadBindings.Touch(ctx, b, rev, now); err != nil {
			d.Log.Warn("inbound: move a thread binding's idle clock", "child", b.TargetSessionKey, "err", err)
		}
	}
	return nil
}

// routes is the router of the worker's configuration, built on first use
// (Deps built by hand in tests get one too).
func (d *Deps) routes() *routing.Router {
	d.routerOnce.Do(func() { d.router = routing.New(d.Config) })
	return d.router
}

// createRouted creates the session of a routed message unless its key
// exists, and returns the entry it created (nil when it created none): a KV
// create, so when the same first message reaches two workers (an adapter's
// retry, a redelivery) exactly one creates it and the other finds it. The
// worker's index answers "exists" without a read for every later message;
// an index behind the bucket only costs a refused create, and one still
// holding a deleted session a second try without it (useIndex false). The entry carries
// where the session came from (origin) and where its replies go
// (deliveryContext and the last route), so it needs no route update.
func (d *Deps) createRouted(ctx context.Context, ip inboundParams, useIndex bool) (*sessions.Entry, error) {
	if ip.route == nil || (useIndex && d.Index != nil && d.Index.Get(ip.sessionKey) != nil) {
		return nil, nil
	}
	now := d.Now().UnixMilli()
	dc := sessions.DeliveryContext{Channel: ip.channel, To: ip.to, AccountID: ip.accountID, ThreadID: ip.threadID}
	e := &sessions.Entry{
		Key: ip.sessionKey, AgentID: ip.route.AgentID, SessionID: sessions.NewID(),
		CreatedAt: now, UpdatedAt: now, Channel: ip.channel, ChatType: ip.route.ChatType,
		Origin: &sessions.Origin{
			Provider: ip.channel, AccountID: ip.accountID, ThreadID: ip.threadID,
			ChatType: ip.route.ChatType, From: ip.from, To: ip.to,
		},
		LastChannel: ip.channel, LastTo: ip.to, LastAccountID: ip.accountID,
		DeliveryContext: &dc,
	}
	if ip.threadID != "" {
		e.Rare = &sessions.RareFields{LastThreadID: ip.threadID}
	}
	lifecycle.Touch(e, time.UnixMilli(now)) // its first human message starts the idle clock
	switch _, err := d.Store.Create(ctx, e); {
	case err == nil:
		return e, nil
	case errors.Is(err, sessions.ErrExists):
		return nil, nil
	default:
		return nil, fmt.Errorf("create session %s: %w", ip.sessionKey, err)
	}
}
