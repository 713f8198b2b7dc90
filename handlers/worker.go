package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/opsapi"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/flows/stores"
	"github.com/sessionbus/sessionbus/handlers/quota"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// Worker is one stateless tool worker: a micro service instance plus the
// index it lists from. Any number may run against one NATS deployment.
type Worker struct {
	Deps   *Deps
	svc    *bus.Service
	ops    *opsapi.API
	guard  *bus.Guard
	stores *stores.Stores
	once   sync.Once
	// cronTicks is this worker's share of the cron tick consumer.
	cronTicks jetstream.ConsumeContext
}

// WorkerOption adjusts a worker's Deps before it starts serving.
type WorkerOption func(*Deps)

// WithStateLog gives session_status a signal log to read (Deps.Signals).
func WithStateLog(l StateLog) WorkerOption { return func(d *Deps) { d.Signals = l } }

// WithHumanTurnHook sets Deps.OnHumanTurn.
func WithHumanTurnHook(fn HumanTurnHook) WorkerOption {
	return func(d *Deps) { d.OnHumanTurn = fn }
}

// WithToolObserver has the worker's service report every answered request
// to o (metrics).
func WithToolObserver(o bus.ToolObserver) WorkerOption { return func(d *Deps) { d.ToolObserver = o } }

// WithQuotaOptions passes opts to the worker's quotas (tests: a fake clock).
// The limits themselves come from the config's quotas section.
func WithQuotaOptions(opts ...quota.Option) WorkerOption {
	return func(d *Deps) { d.quotaOpts = append(d.quotaOpts, opts...) }
}

// StartWorker creates the streams and buckets it needs (idempotently),
// loads the session index and starts answering tool requests and inbound
// human turns.
func StartWorker(ctx context.Context, nc *nats.Conn, cfg *config.Config, v *bus.Verifier, log *slog.Logger, opts ...WorkerOption) (*Worker, error) {
	if log == nil {
		log = slog.Default()
	}
	d := &Deps{Config: cfg, Names: bus.NewNames(cfg.Bus.Prefix), Log: log, Now: time.Now, searchConn: nc}
	w := &Worker{Deps: d}
	fail := func(err error) (*Worker, error) { w.close(); return nil, err }
	var err error
	if d.Redactor, err = sanitize.NewRedactor(cfg.Logging.RedactSensitive, cfg.Logging.RedactPatterns); err != nil {
		return nil, fmt.Errorf("config logging.redactPatterns: %w", err)
	}
	d.Log = slog.New(sanitize.LogHandler(log.Handler(), d.Redactor))
	s, err := stores.Open(ctx, nc, cfg.Bus, stores.WithLogger(log))
	if err != nil {
		return nil, err
	}
	w.stores = s
	d.Store, d.Queue, d.Runs, d.Transcripts = s.Sessions, s.Queue, s.Runs, s.Transcripts
	d.Subagents, d.Claims, d.Revocations, d.Watchers = s.Subagents, s.Claims, s.Revocations, s.Watchers
	d.Deliveries, d.ThreadBindings = s.Deliveries, s.ThreadBindings
	if d.Children, err = subagents.StartIndex(ctx, d.Subagents, log); err != nil {
		return fail(err)
	}
	if err := d.Revocations.Watch(ctx); err != nil {
		return fail(err)
	}
	v.UseRevocations(d.Revocations)
	if d.Index, err = sessions.StartIndex(ctx, s.JS, d.Store, log, IndexDerive(cfg)); err != nil {
		return fail(err)
	}
	// The session index follows its own bucket's deletion (it must empty);
	// the guard brings back what the tools write to.
	w.guard = bus.NewGuard(s.JS, log)
	for _, r := range append(s.Guarded(), d.Queue) {
		if err := w.guard.Watch(r); err != nil {
			return fail(fmt.Errorf("follow stream deletions: %w", err))
		}
	}
	d.Notices = &notices.Recorder{Log: s.Signals, Watchers: d.Watchers, Events: s.Events, Logger: log}
	d.Signals, d.OnHumanTurn = signalLog{s.Signals}, humanTurnRecorder(d.Notices)
	if d.Heads, err = s.Signals.FollowHeads(ctx); err != nil {
		return fail(err)
	}
	d.Lifecycle = lifecycle.New(s, log)
	for _, o := range opts {
		o(d)
	}
	if err := w.startCron(ctx, s); err != nil {
		return fail(err)
	}
	qopts := d.quotaOpts
	if o, ok := d.ToolObserver.(quota.Observer); ok {
		qopts = append([]quota.Option{quota.OnRefused(o.QuotaRefused)}, qopts...)
	}
	d.Quotas = quota.New(cfg.Quotas, qopts...)
	// before Serve, whose flush registers this subscription too
	if w.ops, err = opsapi.Start(nc, d.Names, d.Log, d.ToolObserver); err != nil {
		return fail(err)
	}
	if w.svc, err = bus.Serve(nc, Tools(d), bus.ServiceOptions{Names: d.Names, Verifier: v, Logger: d.Log, Inbound: d.Inbound(), Ops: d.SessionOps(), CronOps: d.CronOps(),
		Observer: d.ToolObserver, Schema: d.Schema(), Quota: d.Quotas.ToolCallBy}); err != nil {
		return fail(err)
	}
	return w, nil
}

// RefusedReplies is how many requests this worker dropped because their
// reply subject was not an inbox (bus.Service.RefusedReplies, and the ops
// JetStream API's).
func (w *Worker) RefusedReplies() int64 { return w.svc.RefusedReplies() + w.ops.Refused() }

// Stop is Shutdown with bus.DefaultShutdownGrace.
func (w *Worker) Stop() { w.Shutdown(bus.DefaultShutdownGrace) }

// Shutdown drains first: it stops taking requests and lets the ones in
// flight finish; a sessions_send still waiting on its run after grace
// answers accepted with its runId, as on its soft timeout. Then it closes
// what the worker opened, which the handlers in flight were still using.
func (w *Worker) Shutdown(grace time.Duration) {
	w.once.Do(func() {
		w.svc.Shutdown(grace)
		w.close()
	})
}

// close releases everything the worker opened: the watches (indexes,
// revocations, heads) and the stores' run watch and transcript pipes.
func (w *Worker) close() {
	w.stopCron()
	w.ops.Stop()
	if w.guard != nil {
		w.guard.Stop()
	}
	if w.Deps.Index != nil {
		w.Deps.Index.Stop()
	}
	if w.Deps.Children != nil {
		w.Deps.Children.Stop()
	}
	if w.Deps.Revocations != nil {
		w.Deps.Revocations.Stop()
	}
	if w.Deps.Heads != nil {
		w.Deps.Heads.Stop()
	}
	if w.stores != nil {
		w.stores.Close()
	}
}
