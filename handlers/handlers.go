// Package handlers holds one file per tool, plus the wiring every tool
// shares: the requester context, session references, transcript views.
// The rules themselves (keys, visibility, send policy) live in
// the top-level rules package, the text safety filters in sanitize.
package handlers

import (
	"context"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/cron"
	"github.com/sessionbus/sessionbus/flows/facts"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/handlers/quota"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/threadbindings"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/routing"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/deliveries"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/signals"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Deps is what the tools read and write.
type Deps struct {
	// Cron is the cron job service (flows/cron): its operations and the
	// tick runner.
	Cron        *cron.Service
	Config      *config.Config
	Names       bus.Names
	Store       *sessions.Store
	Index       *sessions.Index
	Transcripts *transcripts.Store
	Runs        *runs.Records
	Queue       *runqueue.Queue
	Redactor    *sanitize.Redactor
	Subagents   *subagents.Registry // the child registry
	// ThreadBindings maps the conversations thread-bound children were
	// spawned in to them (nil: no thread binding).
	ThreadBindings *threadbindings.Store
	Children       *subagents.Index // the registry as this worker follows it
	Claims         *claims.Claims
	Watchers       *watchers.Store    // watch cursors (sessions_send watch:true)
	Notices        *notices.Recorder  // signal log + notices
	Deliveries     *deliveries.Stream // <prefix>.deliver.<channel>: the answers to `/goal` messages
	Heads          *signals.Heads     // stateVersion per session, for sessions_list rows
	// Revocations are the revoked run tokens, watched; the verifier checks them.
	Revocations *revocations.Store
	// Signals is the signal log session_status reads stateVersion and
	// changesSince from; nil reads as an empty log (stateVersion 0).
	Signals StateLog
	Log     *slog.Logger
	Now     func() time.Time
	// OnHumanTurn, when set, is told of each human turn the ingress
	// accepts (the signal log's human_direct_message); see WithHumanTurnHook.
	OnHumanTurn HumanTurnHook
	// Lifecycle deletes, resets and lists archived sessions (nil: the
	// session ops and sessions_list archived:true are unavailable).
	Lifecycle *lifecycle.Ops
	// ToolObserver, when set, is told of every answered request (metrics);
	// see WithToolObserver.
	ToolObserver bus.ToolObserver
	// Quotas are the worker's per-caller rate limits (nil: none, as in
	// tests that build Deps by hand); StartWorker makes them from the config.
	Quotas    *quota.Limits
	quotaOpts []quota.Option // WithQuotaOptions

	// searchConn asks the transcript search's indexers (sessions_search);
	// StartWorker sets it to the worker's connection. Nil: the tool
	// answers 503.
	searchConn *nats.Conn

	routerOnce sync.Once
	router     *routing.Router // the ingress's, built on first use (routes)

	views     *viewCache                      // sessions_history's entry views, set by Tools
	usageSeen *lru.Cache[usageKey, usageSeen] // session_status's usage parse per entry, set by Tools
	usageTops *lru.Cache[string, usageTop]    // session_status's latest usage per session, set by Tools

	// SpawnHook, when set, is called before each step of a spawn's
	// creation (SpawnStep*); an error stops the spawn there, as a crash
	// would. Tests only: the crash-injection test of docs/subagents.md.
	SpawnHook func(step string) error
}

// tool is the signature of one tool: params decoded, requester resolved.
type tool func(ctx context.Context, d *Deps, r *requester, p rules.Params) (any, error)

// Tools returns every tool this build serves, keyed by tool name.
func Tools(d *Deps) map[string]bus.Handler {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.views == nil {
		d.views = newViewCache(historyCacheMaxBytes)
	}
	if d.usageSeen == nil {
		d.usageSeen, _ = lru.New[usageKey, usageSeen](usageCacheEntries) // errors only for a size <= 0
	}
	if d.usageTops == nil {
		d.usageTops, _ = lru.New[string, usageTop](usageTopEntries)
	}
	all := map[string]tool{
		"sessions_list":    sessionsList,
		"sessions_history": sessionsHistory,
		"sessions_send":    sessionsSend,
		"session_status":   sessionStatus,
		"sessions_yield":   sessionsYield,
		"subagents":        subagentsTool,
		"sessions_spawn":   sessionsSpawn,
		"agents_list":      agentsList,
		"sessions_search":  sessionsSearch,
	}
	out := make(map[string]bus.Handler, len(all))
	for name, t := range all {
		out[name] = d.handler(name, t)
	}
	return out
}

func (d *Deps) handler(name string, t tool) bus.Handler {
	return bus.HandlerFunc(func(ctx context.Context, req *bus.Request) (any, error) {
		p, err := rules.ParseParams(req.Body)
		if err == nil {
			err = p.RefuseNUL()
		}
		if err != nil {
			return nil, d.redactError(bus.Thrown(err))
		}
		r, err := d.newRequester(req.Caller)
		if err != nil {
			return nil, d.redactError(bus.Thrown(err))
		}
		if err := d.checkToolPolicy(r, name); err != nil {
			return nil, err
		}
		res, err := t(ctx, d, r, p)
		if err != nil {
			return nil, d.redactError(bus.Thrown(err))
		}
		if !redactsWholeResult[name] {
			return res, nil
		}
		return d.redactResult(res)
	})
}

// checkToolPolicy is the one place a tool call is checked against the
// caller's tool set (rules.ToolPolicy): a refused call is code 403 with the
// rule that refuses it. The stages read the caller's session entry (role,
// model, group route), its token's sandboxed flag and sender, and config.
func (d *Deps) checkToolPolicy(r *requester, name string) error {
	c := rules.SessionToolContext(d.Config, r.key, facts.Of(d.Index.Get(r.key)), r.sandboxed, r.sender)
	if den := rules.SessionToolPolicy(d.Config, c).Check(c.Role, name); den != nil {
		return &bus.Error{Code: bus.CodeForbidden, Message: den.Error()}
	}
	return nil
}

// badRequest is a thrown argument error raised by a tool itself.
func badRequest(msg string) error { return bus.BadRequest(msg) }

// admitRun is the runs-queued quota of session key: nil, or the 429 that
// refuses the run. Checked before the run's first write, so a refused run
// leaves nothing behind.
func (d *Deps) admitRun(key string) error {
	if e := d.Quotas.Run(key); e != nil {
		return e
	}
	return nil
}

// starter is how the tools start a run a caller may wait on: submit owns
// the steps (watch, record, publish, the idempotent repeat).
func (d *Deps) starter() *submit.Starter {
	return &submit.Starter{Queue: d.Queue, Runs: d.Runs, Log: d.Log}
}
