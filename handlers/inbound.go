package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/routing"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// The ingress (docs/inbound.md): a channel adapter brings a human's message
// into a session with a request on <prefix>.inbound, under an adapter token.
// An explicit session key must exist; a message that names where it came
// from instead is routed to OpenClaw's key, and creates that session when
// it is new (inbound_route.go). The turn runs like any other, its user message
// marked with external_user provenance, and its reply is published to
// <prefix>.deliver.<channel> for the route the message came from.

// Limits of an inbound message.
const (
	// InboundMaxTextBytes bounds the human's text (UTF-8 bytes): above any
	// chat network's own message limit (WhatsApp's 65,536 characters is
	// the largest), and small enough that its transcript entry, JSON
	// escaped, stays far below a transcript entry's 1 MiB.
	InboundMaxTextBytes = 64 << 10
	// inboundMaxIDBytes bounds from, to, accountId and threadId.
	inboundMaxIDBytes = 256
	// inboundDefaultTimeoutSeconds is the wait of `wait: true` without
	// timeoutSeconds.
	inboundDefaultTimeoutSeconds = 30
	// inboundLane: a human turn runs in the session's main lane.
	inboundLane = "main"

	provenanceExternalUser = "external_user"
)

// HumanTurn is what the ingress reports of each human turn it accepted
// (not of an idempotent repeat): the facts a signal-log event
// human_direct_message needs, never the text.
type HumanTurn struct {
	SessionKey       string
	AgentID          string
	SessionID        string
	SpawnedBy        string // the session's parent, if any
	ParentSessionKey string
	Channel          string
	From             string // the sender's id on the channel (the human actor)
	AccountID        string
	ThreadID         string
	RunID            string
	OccurredAt       int64  // unix ms, when the ingress accepted the turn
	DedupeKey        string // "human-message:<runId>", stable across retries
}

// HumanTurnHook is told of every accepted human turn, after its run was
// queued. It is best effort: an error is logged and never fails the turn.
type HumanTurnHook func(ctx context.Context, t HumanTurn) error

// inboundResult is the ingress's reply: accepted at once, or, when the
// adapter waits, the run's outcome as sessions_send reports it.
type inboundResult struct {
	Status     string `json:"status"` // accepted | ok | error | timeout, or a queue's steered | collected | dropped (queue.go)
	RunID      string `json:"runId"`
	SessionKey string `json:"sessionKey"`
	Reply      string `json:"reply,omitempty"`
	Error      string `json:"error,omitempty"`
	// Repeat: the idempotency key was seen before; no second run started.
	Repeat bool `json:"repeat,omitempty"`
	// Created: the message was routed to a session that did not exist,
	// and this request created it.
	Created bool `json:"created,omitempty"`
}

type inboundParams struct {
	sessionKey, channel, from, to, text, accountID, threadID, idempotencyKey string
	timeoutSeconds                                                           int
	// a routed message (no sessionKey): what it names, and where it went
	chatType, groupID, agentID string
	route                      *routing.Route
}

// Inbound is the handler of <prefix>.inbound (bus.ServiceOptions.Inbound).
func (d *Deps) Inbound() bus.Handler {
	return bus.HandlerFunc(func(ctx context.Context, req *bus.Request) (any, error) {
		p, err := rules.ParseParams(req.Body)
		if err != nil {
			return nil, bus.Thrown(err)
		}
		ip, err := readInboundParams(p)
		if err != nil {
			return nil, bus.Thrown(err)
		}
		if !req.Caller.AllowsChannel(ip.channel) {
			return nil, bus.Errorf(bus.CodeForbidden,
				"this adapter token is for channel %q, not %q: mint one with `sessionbus token --adapter %s` (or --adapter '*' for every channel)",
				req.Caller.Adapter, ip.channel, ip.channel)
		}
		if err := d.routeInbound(ctx, &ip); err != nil {
			return nil, bus.Thrown(err)
		}
		// `/queue [mode] [options]` sets the session's queue (queue_command.go)
		if args, ok := parseQueueCommand(ip.text); ok {
			res, err := d.inboundQueue(ctx, req, ip, args)
			return res, bus.Thrown(err)
		}
		// `/steer <message>`, `/tell <message>`: into the running turn, or
		// a normal prompt when none takes it (steer_command.go); outside
		// the command table, since a steer may go on as a turn
		if msg, ok := parseSteerCommand(ip.text); ok {
			res, done, err := d.inboundSteer(ctx, req, ip, msg)
			if done || err != nil {
				return res, bus.Thrown(err)
			}
			ip.text = msg
		}
		// a chat command is answered here and queues no turn (commands.go)
		if res, handled, err := d.runCommand(ctx, ip); handled {
			return res, bus.Thrown(err)
		}
		// a session whose send policy denies takes no human turn, as
		// OpenClaw's dispatch drops it: nothing is written or run
		if err := d.checkTurnSendPolicy(ctx, ip); err != nil {
			return nil, bus.Thrown(err)
		}
		// a human turn counts against the session it is for (the adapter
		// speaks for no session), before its first write
		if err := d.admitRun(ip.sessionKey); err != nil {
			return nil, err
		}
		// a session its reset policy expired starts over with this message
		if err := d.expireStale(ctx, ip); err != nil {
			return nil, bus.Thrown(err)
		}
		res, err := d.inbound(ctx, ip)
		return res, bus.Thrown(err)
	})
}

func readInboundParams(p rules.Params) (inboundParams, error) {
	var ip inboundParams
	var err error
	// without a sessionKey the message is routed (routeInbound)
	if ip.sessionKey, _, err = p.String("sessionKey"); err != nil {
		return ip, err
	}
	if ip.sessionKey != "" {
		if err := rules.ValidateSessionKeyInput(ip.sessionKey); err != nil {
			return ip, err
		}
	}
	ch, err := p.RequiredString("channel")
	if err != nil {
		return ip, err
	}
	if ip.channel, err = bus.NormalizeChannel(ch); err != nil {
		return ip, badRequest(err.Error())
	}
	if ip.from, err = p.RequiredString("from"); err != nil {
		return ip, err
	}
	if ip.text, err = p.RequiredString("text"); err != nil {
		return ip, err
	}
	if n := len(ip.text); n > InboundMaxTextBytes {
		return ip, bus.Errorf(bus.CodeTooLarge, "text is %d bytes; an inbound message carries at most %d bytes (64 KiB): split it", n, InboundMaxTextBytes)
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"to", &ip.to}, {"accountId", &ip.accountID}, {"threadId", &ip.threadID}, {"idempotencyKey", &ip.idempotencyKey}} {
		if *f.v, _, err = p.String(f.name); err != nil {
			return ip, err
		}
	}
	for _, f := range []struct{ name, v string }{{"from", ip.from}, {"to", ip.to}, {"accountId", ip.accountID}, {"threadId", ip.threadID}, {"idempotencyKey", ip.idempotencyKey}} {
		if err := checkInboundID(f.name, f.v); err != nil {
			return ip, err
		}
	}
	if err := readRouteParams(p, &ip); err != nil {
		return ip, err
	}
	if ip.to == "" {
		// a direct message is answered to its sender, a group's in the group
		ip.to = rules.FirstNonEmpty(ip.groupID, ip.from)
	}
	wait, hasWait, err := p.Bool("wait")
	if err != nil {
		return ip, err
	}
	t, hasT, err := p.NonNegativeInt("timeoutSeconds")
	if err != nil {
		return ip, err
	}
	switch {
	case hasWait && !wait:
		ip.timeoutSeconds = 0
	case hasT:
		ip.timeoutSeconds = t
	case wait:
		ip.timeoutSeconds = inboundDefaultTimeoutSeconds
	}
	return ip, nil
}

// checkInboundID refuses an id (sender, recipient, account, thread,
// idempotency key) that is too long or holds control characters, which
// would corrupt the route or the log lines that show it.
func checkInboundID(name, v string) error {
	if n := len(v); n > inboundMaxIDBytes {
		return badRequest(fmt.Sprintf("%s must be at most %d bytes (got %d)", name, inboundMaxIDBytes, n))
	}
	if !utf8.ValidString(v) {
		return badRequest(name + " must be valid UTF-8")
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return badRequest(fmt.Sprintf("%s contains a control character (%U)", name, r))
		}
	}
	return nil
}

func (d *Deps) inbound(ctx context.Context, ip inboundParams) (*inboundResult, error) {
	route := inboundRoute(ip)
	at := d.Now()
	entry, err := d.createRouted(ctx, ip, true)
	created := entry != nil
	if err == nil && !created {
		// The route update is the first write, and reads the entry: an
		// unknown session is refused here, before anything is written.
		entry, _, err = d.Store.Update(ctx, ip.sessionKey, func(e *sessions.Entry) error {
			touched := lifecycle.Touch(e, at) // the idle reset's clock
			if ip.channel == InternalChannel {
				if !touched {
					return record.ErrUnchanged
				}
				return nil
			}
			if err := setRoute(e, route); err != nil && !touched {
				return err
			}
			return nil
		})
		if errors.Is(err, sessions.ErrNotFound) && ip.route != nil {
			entry, err = d.createRouted(ctx, ip, false) // the index still held a deleted session
			created = entry != nil
		}
	}
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, bus.Errorf(bus.CodeNotFound,
			"unknown session %s: the ingress brings human turns into existing sessions only; check the key (sessions_list shows them) or create the session first",
			ip.sessionKey)
	}
	if err != nil {
		return nil, fmt.Errorf("update the route of session %s: %w", ip.sessionKey, err)
	}

	now := at.UnixMilli()
	runID := sessions.NewID()
	if ip.idempotencyKey != "" {
		runID = inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
	}
	agentID := rules.FirstNonEmpty(entry.AgentID, rules.AgentIDFromKey(ip.sessionKey))
	req, rec := humanRun(ip, agentID, runID, now)
	// while a turn runs, the session's queue mode decides (queue.go)
	if out, handled, err := d.queueInbound(ctx, ip, entry, req, rec); err != nil || handled {
		if handled {
			d.reportHumanTurn(ctx, HumanTurn{
				SessionKey: ip.sessionKey, AgentID: agentID, SessionID: entry.SessionID,
				SpawnedBy: entry.SpawnedBy, ParentSessionKey: entry.ParentSessionKey,
				Channel: ip.channel, From: ip.from, AccountID: ip.accountID, ThreadID: ip.threadID,
				RunID: runID, OccurredAt: now, DedupeKey: "human-message:" + runID,
			})
			out.Created = created
		}
		return out, err
	}
	q, err := d.starter().Start(ctx, "inbound", req, rec, ip.timeoutSeconds > 0)
	if err != nil {
		return nil, fmt.Errorf("queue the turn of session %s: %w", ip.sessionKey, err)
	}
	defer q.Stop()
	if !q.Repeat {
		d.reportHumanTurn(ctx, HumanTurn{
			SessionKey: ip.sessionKey, AgentID: agentID, SessionID: entry.SessionID,
			SpawnedBy: entry.SpawnedBy, ParentSessionKey: entry.ParentSessionKey,
			Channel: ip.channel, From: ip.from, AccountID: ip.accountID, ThreadID: ip.threadID,
			RunID: runID, OccurredAt: now, DedupeKey: "human-message:" + runID,
		})
	}
	out := &inboundResult{Status: "accepted", RunID: runID, SessionKey: ip.sessionKey, Repeat: q.Repeat, Created: created}
	if ip.timeoutSeconds == 0 {
		return out, nil
	}
	last, err := q.Wait(ctx, time.Duration(ip.timeoutSeconds)*time.Second)
	switch {
	case err != nil:
		out.Status, out.Error = "error", err.Error()
	case last == nil: // still running: the reply will be delivered to the channel
	case last.Status == runs.OK:
		out.Status, out.Reply = "ok", last.Reply
	case last.Status == runs.Timeout:
		out.Status, out.Error = "timeout", rules.FirstNonEmpty(last.Error, errSendRunTimeout)
	default:
		out.Status, out.Error = "error", rules.FirstNonEmpty(last.Error, errSendAgentError)
	}
	return out, nil
}

// InternalChannel is OpenClaw's internal WebChat UI channel, the one the
// console's chat speaks on. It is no outbound channel: a message from it
// does not move where the session's replies and announces go (its last
// route), as OpenClaw's Control UI chat does not, so a person who writes
// from the console keeps getting announces on their real channel.
const InternalChannel = "webchat"

// inboundRoute is where the message came from, where its reply goes.
func inboundRoute(ip inboundParams) *runqueue.Route {
	return &runqueue.Route{Channel: ip.channel, To: ip.to, AccountID: ip.accountID, ThreadID: ip.threadID, From: ip.from}
}

// humanRun is the run of a human message: its request and pending record.
func humanRun(ip inboundParams, agentID, runID string, now int64) (*runqueue.Request, *runs.Record) {
	req := &runqueue.Request{
		RunID:      runID,
		SessionKey: ip.sessionKey,
		AgentID:    agentID,
		Message:    ip.text,
		Prompt:     ip.text, // a human's words go in as they are: no inter-session marker
		Provenance: &runqueue.Provenance{Kind: provenanceExternalUser, SourceChannel: ip.channel},
		Lane:       inboundLane,
		ChainID:    runID, // a human turn starts a chain of its own
		CreatedAt:  now,
		ReplyTo:    inboundRoute(ip),
	}
	rec := &runs.Record{
		RunID: runID, SessionKey: ip.sessionKey, AgentID: agentID, Status: runs.Pending,
		CreatedAt: now, ChainID: runID, IdempotencyKey: ip.idempotencyKey,
	}
	return req, rec
}

// setRoute records where the session's last human message came from, which
// is where its replies and announces go (gateway.ResolveAnnounceTarget);
// unchanged, it writes nothing.
func setRoute(e *sessions.Entry, r *runqueue.Route) error {
	dc := sessions.DeliveryContext{Channel: r.Channel, To: r.To, AccountID: r.AccountID, ThreadID: r.ThreadID}
	if e.LastChannel == r.Channel && e.LastTo == r.To && e.LastAccountID == r.AccountID &&
		e.LastThreadID() == r.ThreadID && e.DeliveryContext != nil && *e.DeliveryContext == dc {
		return record.ErrUnchanged
	}
	e.LastChannel, e.LastTo, e.LastAccountID = r.Channel, r.To, r.AccountID
	if e.LastThreadID() != r.ThreadID {
		e.SetRare(func(x *sessions.RareFields) { x.LastThreadID = r.ThreadID })
	}
	e.DeliveryContext = &dc
	return nil
}

func (d *Deps) reportHumanTurn(ctx context.Context, t HumanTurn) {
	if d.OnHumanTurn == nil {
		return
	}
	if err := d.OnHumanTurn(ctx, t); err != nil {
		d.Log.Warn("inbound: recording the human turn failed (the turn goes on)", "session", t.SessionKey, "runId", t.RunID, "err", err)
	}
}

// inboundRunID derives the run id of an inbound message from (channel,
// session, idempotency key), formatted as a UUID (version 8, name-based),
// so a retried message never runs twice.
func inboundRunID(channel, sessionKey, key string) string {
	return bus.DerivedUUID("sessionbus/inbound", channel, sessionKey, key)
}
