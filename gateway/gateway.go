// Package gateway executes run requests: every replica pulls from the shared
// durable consumer on SB_RUNS, runs one turn at a time per session (held by
// the transcript's compare-and-set, see lane.go), records the outcome in the
// runs bucket, and drives the
// agent-to-agent flow (ping-pong, announce) as durable continuation runs.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/flows/stores"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/kv/a2a"
	"github.com/sessionbus/sessionbus/kv/childslots"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/deliveries"
	"github.com/sessionbus/sessionbus/streams/events"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Defaults of Options.
const (
	DefaultConcurrency    = 32
	DefaultAckWait        = 30 * time.Second
	DefaultTimeoutSeconds = 600
	DefaultRetryDelay     = time.Second
	MaxRetryDelay         = 30 * time.Second
	// MaxRunFailures is how often one gateway tries a run whose attempts
	// fail (a deleted stream or bucket, a store that refuses its writes)
	// before it records the run as failed and drops its message. Waiting
	// for a session another run holds is no failure and never counts.
	MaxRunFailures = 5
)

// Options tune a gateway; zero values take the defaults.
type Options struct {
	Concurrency int // concurrent executors (default 32)
	// AckWait of the shared consumer when this replica creates it (default
	// 30 s): how long a run whose gateway died waits before another
	// replica takes it. A replica that finds the consumer made keeps its
	// AckWait, and paces its heartbeats by it.
	AckWait time.Duration
	// RetryDelay is the wait before a failed run's first retry (default
	// 1 s); it doubles with each failure, up to MaxRetryDelay.
	RetryDelay time.Duration
	// Observer is told of runs and deliveries (metrics); nil observes
	// nothing.
	Observer Observer
	// RunCredentials, when set, gives each exec run a NATS user of its
	// own, revoked when its turn returns; nil: exec runs get none.
	RunCredentials RunCredentials
}

// Gateway is one running gateway replica.
type Gateway struct {
	// evMu orders the events follower's callbacks before Stop's wait: a
	// callback starts work on wg, which must not be added to while Stop
	// waits on it; evStopped, set by Stop under the write lock, turns
	// later callbacks away
	evMu      sync.RWMutex
	evStopped bool

	id    string
	nc    *nats.Conn
	js    jetstream.JetStream
	cfg   *config.Config
	op    *bus.Operator
	log   *slog.Logger
	names bus.Names
	// redact masks credentials in what a run leaves behind (its error,
	// which quotes a runtime's stderr) and in every log line.
	redact *sanitize.Redactor

	runs     *runs.Records
	queue    *runqueue.Queue
	flows    *a2a.Store
	tr       *transcripts.Store
	store    *sessions.Store
	slots    *childslots.Slots // the fleet's sub-agent run bound
	failures recent[int]       // failed attempts per queued message (stream sequence)
	deliver  *deliveries.Stream
	revoked  *revocations.Store // a run's tokens end with the run

	runtimes     map[string]runtime.Runtime
	wantsContext map[string]bool // agents whose turns read the model's context
	needsToken   map[string]bool // agents whose runtime is given the run token
	echo         runtime.Runtime
	alias        rules.Alias // session.mainKey and session.scope, to resolve a requester's key

	ackWait    time.Duration // the shared consumer's, once bound
	retryDelay time.Duration
	conc       int

	ctx    context.Context
	cancel context.CancelFunc
	guard  *bus.Guard
	// guarded are the stores the guard brings back (stores.Guarded), with
	// the gateway's own sessions, sub-agent slots and run queue added in
	// follow
	guarded []bus.Recreatable
	opts    Options
	// iterMu guards iter and rebound: a rebind after SB_RUNS was deleted
	// swaps the iterator and closes rebound.
	iterMu  sync.Mutex
	iter    jetstream.MessagesContext
	rebound chan struct{}
	wg      sync.WaitGroup

	// sub-agents: the child registry (and this gateway's view of it), the
	// delivery claims and SB_EVENTS, where completion announces go
	reg      *subagents.Registry
	children *subagents.Index
	claims   *claims.Claims
	events   *events.Stream
	// the signal log, watch cursors and the notices they open
	recorder *notices.Recorder
	watchers *watchers.Store
	pending  pendingNotices
	// life deletes, resets and archives sessions (sub-agent cleanup,
	// archiveAfterMinutes) and keeps the disk budget
	life *lifecycle.Ops
	// sweepEvery paces the sweeps of the registry (timers, stuck
	// spawns and announces); announceRetries bounds an announce's
	// delivery attempts before it is recorded failed
	sweepEvery      time.Duration
	announceRetries int
	// ctxCache keeps live sessions' model contexts between runs (nil:
	// bus.contextCacheBytes is 0); unregister takes its metrics away
	ctxCache   *ctxCache
	ctxReads   atomic.Uint64 // transcript entries read for contexts
	unregister func()
}

// Start opens the run protocol's storage and starts consuming with the
// default options.
func Start(ctx context.Context, nc *nats.Conn, cfg *config.Config, op *bus.Operator, id string, log *slog.Logger) (*Gateway, error) {
	return StartWithOptions(ctx, nc, cfg, op, id, log, Options{})
}

// StartWithOptions is Start with tuning.
func StartWithOptions(ctx context.Context, nc *nats.Conn, cfg *config.Config, op *bus.Operator, id string, log *slog.Logger, o Options) (*Gateway, error) {
	if cfg == nil {
		cfg = config.Default()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if op == nil {
		return nil, errors.New("gateway: an operator key is needed to mint run tokens")
	}
	if id == "" {
		id = "gateway"
	}
	o = o.withDefaults()
	g, err := newGateway(nc, cfg, op, id, log, o)
	if err != nil {
		return nil, err
	}
	if err := g.openStores(ctx); err != nil {
		return nil, err
	}
	fail := func(err error) (*Gateway, error) {
		g.children.Stop()
		g.slots.Stop()
		g.tr.Close()
		g.runs.Close()
		return nil, err
	}
	cons, err := g.bindConsumer(ctx, o)
	if err != nil {
		return fail(fmt.Errorf("gateway consumer %s: %w", g.names.GatewaysConsumer(), err))
	}
	if aw := cons.CachedInfo().Config.AckWait; aw > 0 {
		if aw != o.AckWait && o.AckWait != DefaultAckWait {
			g.log.Warn("gateway: the shared consumer keeps its ack wait; pacing heartbeats by it",
				"consumer", g.names.GatewaysConsumer(), "ackWait", aw, "asked", o.AckWait)
		}
		g.ackWait = aw
	}
	if err := g.openSlots(ctx); err != nil {
		return fail(err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(o.Concurrency), jetstream.PullExpiry(bus.PullExpiry), jetstream.PullHeartbeat(bus.PullHeartbeat))
	if err != nil {
		return fail(fmt.Errorf("gateway consume: %w", err))
	}
	g.iter, g.opts, g.rebound = iter, o, make(chan struct{})
	if err := g.follow(); err != nil {
		iter.Stop()
		return fail(err)
	}
	g.registerMetrics(o.Observer)
	g.wg.Add(5)
	go g.lifecycleLoop()
	go g.dispatch()
	go g.trimLoop()
	go g.sweepLoop()
	go g.noticeSweepLoop()
	g.log.Debug("gateway started", "concurrency", o.Concurrency)
	return g, nil
}

// withDefaults is o with its zero values replaced by the defaults.
func (o Options) withDefaults() Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultAckWait
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	return o
}

// newGateway is a gateway that has opened nothing yet: its logger, which
// masks credentials, its runtimes and its pacing.
func newGateway(nc *nats.Conn, cfg *config.Config, op *bus.Operator, id string, log *slog.Logger, o Options) (*Gateway, error) {
	red, err := sanitize.NewRedactor(cfg.Logging.RedactSensitive, cfg.Logging.RedactPatterns)
	if err != nil {
		return nil, fmt.Errorf("config logging.redactPatterns: %w", err)
	}
	log = slog.New(sanitize.LogHandler(log.Handler(), red))
	g := &Gateway{
		id: id, nc: nc, cfg: cfg, op: op, log: log.With("gateway", id), names: bus.NewNames(cfg.Bus.Prefix), redact: red,
		runtimes: map[string]runtime.Runtime{}, wantsContext: map[string]bool{}, needsToken: map[string]bool{},
		ackWait: o.AckWait, conc: o.Concurrency, retryDelay: o.RetryDelay,
	}
	for _, a := range cfg.Agents.List {
		rt, err := runtime.New(a)
		if err != nil {
			return nil, err
		}
		g.runtimes[a.ID] = rt
		// script turns never look at the context; reading it per turn was
		// a third of a send's cost. A script that can summarize reads it
		// for its compactions.
		_, summarizes := g.summarizerOf(rt)
		g.wantsContext[a.ID] = (a.Runtime != "" && a.Runtime != runtime.KindScript) || summarizes
		g.needsToken[a.ID] = a.Runtime == runtime.KindExec
	}
	g.noteRunUsers(o)
	cacheBytes, err := cfg.ContextCache()
	if err != nil {
		return nil, err
	}
	if cacheBytes > 0 {
		g.ctxCache = newCtxCache(int(min(cacheBytes, int64(math.MaxInt))))
	}
	g.alias = rules.ResolveAlias(cfg.Session.MainKey, cfg.Session.Scope)
	if g.echo, err = runtime.New(config.Agent{ID: "echo"}); err != nil {
		return nil, err
	}
	g.sweepEvery, g.announceRetries = cfg.Bus.SubagentSweepInterval, cfg.Bus.AnnounceRetries
	if g.sweepEvery <= 0 {
		g.sweepEvery = DefaultSweepInterval
	}
	if g.announceRetries <= 0 {
		g.announceRetries = DefaultAnnounceRetries
	}
	return g, nil
}

// openStores opens the stores the gateway works on (closing them again on
// an error) and starts its view of the child registry.
func (g *Gateway) openStores(ctx context.Context) error {
	s, err := stores.Open(ctx, g.nc, g.cfg.Bus, stores.WithLogger(g.log), stores.WithGatewayStores())
	if err != nil {
		return err
	}
	g.js = s.JS
	g.queue, g.runs, g.flows, g.tr, g.store, g.deliver = s.Queue, s.Runs, s.A2A, s.Transcripts, s.Sessions, s.Deliveries
	g.reg, g.claims, g.events, g.watchers, g.revoked = s.Subagents, s.Claims, s.Events, s.Watchers, s.Revocations
	g.recorder = &notices.Recorder{Log: s.Signals, Watchers: s.Watchers, Events: s.Events, Logger: g.log}
	g.life = lifecycle.New(s, g.log)
	// maintenance reads a table of session stamps its watch keeps, not the
	// whole bucket every pass (the watch starts with the first pass)
	g.life.Stamps = lifecycle.NewStamps(s.Sessions, g.log)
	g.guarded = s.Guarded()
	if g.children, err = subagents.StartIndex(ctx, g.reg, g.log); err != nil {
		s.Close()
		return err
	}
	return nil
}

// follow has the guard bring back what an operator deletes and starts
// following SB_EVENTS: before the first sweep, so an announce published
// meanwhile is received, and one published before is the sweep's.
func (g *Gateway) follow() error {
	g.guard = bus.NewGuard(g.js, g.log)
	for _, r := range append(g.guarded, g.store, g.slots, queueGuard{g}) {
		if err := g.guard.Watch(r); err != nil {
			g.guard.Stop()
			return fmt.Errorf("follow stream deletions: %w", err)
		}
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	onEvent := func(ev *events.Event) {
		g.evMu.RLock()
		defer g.evMu.RUnlock()
		if g.evStopped {
			return
		}
		switch ev.Kind {
		case events.KindAnnounce:
			g.onAnnounce(ev)
		case events.KindNotice:
			g.onNotice(ev)
		}
	}
	if err := g.events.Follow(g.ctx, g.log, onEvent); err != nil {
		g.cancel()
		g.guard.Stop()
		return err
	}
	return nil
}

// bindConsumer binds to the consumer every replica shares, creating it
// with o's AckWait if it is missing. An existing one keeps its AckWait:
// rewriting it would shorten the wait under replicas whose heartbeats are
// paced by the old one. Only its MaxAckPending is raised, to what this
// replica's concurrency needs.
func (g *Gateway) bindConsumer(ctx context.Context, o Options) (jetstream.Consumer, error) {
	st := g.queue.Stream()
	pending := max(1024, 8*o.Concurrency)
	cons, err := st.Consumer(ctx, g.names.GatewaysConsumer())
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = st.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       g.names.GatewaysConsumer(),
			Description:   "sessionbus gateways share this consumer",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       o.AckWait,
			MaxAckPending: pending,
			MaxDeliver:    -1,
		})
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = st.Consumer(ctx, g.names.GatewaysConsumer()) // created meanwhile
		}
	}
	if err != nil {
		return nil, err
	}
	if cfg := cons.CachedInfo().Config; cfg.MaxAckPending > 0 && cfg.MaxAckPending < pending {
		cfg.MaxAckPending = pending
		if cons, err = st.UpdateConsumer(ctx, cfg); err != nil {
			return nil, fmt.Errorf("raise max ack pending to %d: %w", pending, err)
		}
	}
	return cons, nil
}

func (g *Gateway) current() (jetstream.MessagesContext, chan struct{}) {
	g.iterMu.Lock()
	defer g.iterMu.Unlock()
	return g.iter, g.rebound
}

// queueGuard recreates SB_RUNS after an operator deleted it and binds the
// gateway to a new shared consumer on it (see bus.Guard).
type queueGuard struct{ g *Gateway }

func (q queueGuard) Streams() []string { return q.g.queue.Streams() }

func (q queueGuard) Recreate(ctx context.Context, deleted string) error {
	g := q.g
	if err := g.queue.Recreate(ctx, deleted); err != nil {
		return err
	}
	cons, err := g.bindConsumer(ctx, g.opts)
	if err != nil {
		return fmt.Errorf("bind the gateway consumer again: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(g.conc), jetstream.PullExpiry(bus.PullExpiry), jetstream.PullHeartbeat(bus.PullHeartbeat))
	if err != nil {
		return fmt.Errorf("consume again: %w", err)
	}
	g.iterMu.Lock()
	old, done := g.iter, g.rebound
	g.iter, g.rebound = it, make(chan struct{})
	g.iterMu.Unlock()
	old.Stop()
	close(done)
	if g.ctx.Err() != nil { // stopped meanwhile: Stop may have missed it
		it.Stop()
	}
	return nil
}

// heartbeat is how often a running turn tells the server it is still
// working: three times per ack wait.
func (g *Gateway) heartbeat() time.Duration { return g.ackWait / 3 }

// ID is the gateway's name.
func (g *Gateway) ID() string { return g.id }

// Runs is the run records the gateway writes.
func (g *Gateway) Runs() *runs.Records { return g.runs }

// Queue is the run queue the gateway takes runs from.
func (g *Gateway) Queue() *runqueue.Queue { return g.queue }

// Transcripts is the transcript store the gateway uses.
func (g *Gateway) Transcripts() *transcripts.Store { return g.tr }

// dispatch takes a message only when an executor slot is free.
func (g *Gateway) dispatch() {
	defer g.wg.Done()
	sem := make(chan struct{}, g.conc)
	for {
		select {
		case sem <- struct{}{}:
		case <-g.ctx.Done():
			return
		}
		it, rebound := g.current()
		msg, err := it.Next()
		if err != nil {
			<-sem
			if g.ctx.Err() != nil {
				return
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				// SB_RUNS (and so the consumer) was deleted, or a rebind
				// replaced the iterator: wait for the new one.
				select {
				case <-rebound:
				case <-g.ctx.Done():
					return
				}
				continue
			}
			g.log.Warn("gateway: next run", "err", err)
			continue
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer func() { <-sem }()
			g.handle(msg)
		}()
	}
}

// trimEvery is how often each gateway purges the runs every gateway is
// done with (see runqueue.Queue.Trim).
const trimEvery = 10 * time.Second

func (g *Gateway) trimLoop() {
	defer g.wg.Done()
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := opCtx(g.ctx)
			n, err := g.queue.Trim(ctx)
			cancel()
			if err != nil && g.ctx.Err() == nil {
				g.log.Warn("gateway: trim finished runs", "err", err)
			} else if n > 0 {
				g.log.Debug("gateway: trimmed finished runs", "purged", n)
			}
		}
	}
}

// Stop stops consuming, interrupts running turns (their messages are nak'd
// so another replica runs them) and waits for the executors.
func (g *Gateway) Stop() {
	if g == nil || g.cancel == nil {
		return
	}
	g.cancel()
	g.evMu.Lock()
	g.evStopped = true
	g.evMu.Unlock()
	g.guard.Stop()
	it, _ := g.current()
	it.Stop()
	g.wg.Wait()
	g.life.Stamps.Stop()
	g.children.Stop()
	g.slots.Stop()
	g.runs.Close()
	g.tr.Close()
	if g.unregister != nil {
		g.unregister()
	}
}
