// Package stores opens a deployment's streams, buckets and object store
// together, each with the replicas and ages the bus config gives it: what
// a worker and a gateway both work on, so they open it one way.
package stores

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/a2a"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/threadbindings"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/streams/deadletters"
	"github.com/sessionbus/sessionbus/streams/deliveries"
	"github.com/sessionbus/sessionbus/streams/events"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/signals"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Stores are the opened stores of one deployment (one bus.prefix).
type Stores struct {
	JS    jetstream.JetStream
	Names bus.Names

	Sessions    *sessions.Store
	Transcripts *transcripts.Store
	Runs        *runs.Records
	Queue       *runqueue.Queue
	Subagents   *subagents.Registry
	Claims      *claims.Claims
	Revocations *revocations.Store
	Signals     *signals.Log
	Watchers    *watchers.Store
	Events      *events.Stream
	Archives    *archives.Store
	// ThreadBindings maps bound conversations to sub-agent sessions.
	ThreadBindings *threadbindings.Store

	// Only gateways write these (nil unless opened WithGatewayStores).
	A2A        *a2a.Store
	Deliveries *deliveries.Stream
	// DeadLetters is where channel adapters, which may create no stream,
	// record the deliveries they gave up on.
	DeadLetters *deadletters.Stream
}

// Option configures Open.
type Option func(*options)

type options struct {
	log     *slog.Logger
	gateway bool
}

// WithLogger sets where the signal log and the revocations watch log what
// they cannot read or write (default: the signal log to slog.Default, the
// revocations nowhere).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithGatewayStores also opens the stores only gateways write: the a2a
// bucket and SB_DELIVER.
func WithGatewayStores() Option { return func(o *options) { o.gateway = true } }

// Open opens every store, creating what is absent with cfg's replicas
// (bus.replicas) and ages (bus.runRecordMaxAge for run records and a2a
// flows, bus.deliverMaxAge for SB_DELIVER; the stores' defaults for the
// rest). Existing streams and buckets keep their settings. On an error it
// closes what it opened.
func Open(ctx context.Context, nc *nats.Conn, cfg config.Bus, opts ...Option) (*Stores, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s := &Stores{JS: js, Names: bus.NewNames(cfg.Prefix)}
	if err := s.open(ctx, nc, cfg, o); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Stores) open(ctx context.Context, nc *nats.Conn, cfg config.Bus, o options) (err error) {
	js, names, r := s.JS, s.Names, cfg.Replicas
	if s.Sessions, err = sessions.Open(ctx, js, names, sessions.WithReplicas(r)); err != nil {
		return err
	}
	if s.Queue, err = runqueue.Open(ctx, js, names, runqueue.WithReplicas(r)); err != nil {
		return err
	}
	if s.Runs, err = runs.Open(ctx, js, names, runs.WithReplicas(r), runs.WithMaxAge(cfg.RunRecordMaxAge)); err != nil {
		return err
	}
	if s.Transcripts, err = transcripts.Open(ctx, nc, js, names, transcripts.WithReplicas(r)); err != nil {
		return err
	}
	if s.Subagents, err = subagents.Open(ctx, js, names, subagents.WithReplicas(r)); err != nil {
		return err
	}
	if s.ThreadBindings, err = threadbindings.Open(ctx, js, names, threadbindings.WithReplicas(r)); err != nil {
		return err
	}
	if s.Claims, err = claims.Open(ctx, js, names, claims.WithReplicas(r)); err != nil {
		return err
	}
	if s.Revocations, err = revocations.Open(ctx, js, names, revocations.WithReplicas(r), revocations.WithLogger(o.log)); err != nil {
		return err
	}
	if s.Signals, err = signals.Open(ctx, js, names, signals.WithReplicas(r), signals.WithLogger(o.log)); err != nil {
		return err
	}
	if s.Watchers, err = watchers.Open(ctx, js, names, watchers.WithReplicas(r)); err != nil {
		return err
	}
	if s.Events, err = events.Open(ctx, js, names, events.WithReplicas(r)); err != nil {
		return err
	}
	if s.Archives, err = archives.Open(ctx, js, names, archives.WithReplicas(r)); err != nil {
		return err
	}
	// workers deliver too: the answer to a human's /goal message
	if s.Deliveries, err = deliveries.Open(ctx, js, names, deliveries.WithReplicas(r), deliveries.WithMaxAge(cfg.DeliverMaxAge)); err != nil {
		return err
	}
	if s.DeadLetters, err = deadletters.Open(ctx, js, names, r); err != nil {
		return err
	}
	if !o.gateway {
		return nil
	}
	s.A2A, err = a2a.Open(ctx, js, names, a2a.WithReplicas(r), a2a.WithMaxAge(cfg.RunRecordMaxAge))
	return err
}

// Guarded are the stores a bus.Guard brings back when an operator deletes
// one: every store opened here but the run queue and the sessions bucket,
// which their users follow themselves (a gateway rebinds its consumer on a
// new SB_RUNS; a worker's session index empties with its bucket).
func (s *Stores) Guarded() []bus.Recreatable {
	out := []bus.Recreatable{s.Runs, s.Transcripts, s.Subagents, s.Claims, s.Revocations,
		s.Signals, s.Watchers, s.Events, s.Archives, s.ThreadBindings}
	if s.A2A != nil {
		out = append(out, s.A2A)
	}
	if s.Deliveries != nil {
		out = append(out, s.Deliveries)
	}
	if s.DeadLetters != nil {
		out = append(out, s.DeadLetters)
	}
	return out
}

// Close releases what the stores hold open: the transcript reader's pipes
// and the run-record watch. The streams and buckets stay as they are.
func (s *Stores) Close() {
	if s.Transcripts != nil {
		s.Transcripts.Close()
	}
	if s.Runs != nil {
		s.Runs.Close()
	}
}
