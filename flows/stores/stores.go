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

// logger is where a retried open is logged: the WithLogger one, else
// slog.Default.
func (o options) logger() *slog.Logger {
	if o.log != nil {
		return o.log
	}
	return slog.Default()
}

// WithGatewayStores also opens the stores only gateways write: the a2a
// bucket and SB_DELIVER.
func WithGatewayStores() Option { return func(o *options) { o.gateway = true } }

// Open opens every store, creating what is absent with cfg's replicas
// (bus.replicas) and ages (bus.runRecordMaxAge for run records and a2a
// flows, bus.deliverMaxAge for SB_DELIVER; the stores' defaults for the
// rest). Existing streams and buckets keep their settings. A store that
// fails to open for a reason a settling cluster gives (see Transient) is
// tried again until ctx ends, so ctx's deadline bounds the start. On an
// error it closes what it opened.
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

func (s *Stores) open(ctx context.Context, nc *nats.Conn, cfg config.Bus, o options) error {
	js, names, r := s.JS, s.Names, cfg.Replicas
	steps := []step{
		{"sessions", func(ctx context.Context) (err error) {
			s.Sessions, err = sessions.Open(ctx, js, names, sessions.WithReplicas(r))
			return err
		}},
		{"run queue", func(ctx context.Context) (err error) {
			s.Queue, err = runqueue.Open(ctx, js, names, runqueue.WithReplicas(r))
			return err
		}},
		{"run records", func(ctx context.Context) (err error) {
			s.Runs, err = runs.Open(ctx, js, names, runs.WithReplicas(r), runs.WithMaxAge(cfg.RunRecordMaxAge))
			return err
		}},
		{"transcripts", func(ctx context.Context) (err error) {
			s.Transcripts, err = transcripts.Open(ctx, nc, js, names, transcripts.WithReplicas(r))
			return err
		}},
		{"subagents", func(ctx context.Context) (err error) {
			s.Subagents, err = subagents.Open(ctx, js, names, subagents.WithReplicas(r))
			return err
		}},
		{"thread bindings", func(ctx context.Context) (err error) {
			s.ThreadBindings, err = threadbindings.Open(ctx, js, names, threadbindings.WithReplicas(r))
			return err
		}},
		{"claims", func(ctx context.Context) (err error) {
			s.Claims, err = claims.Open(ctx, js, names, claims.WithReplicas(r))
			return err
		}},
		{"revocations", func(ctx context.Context) (err error) {
			s.Revocations, err = revocations.Open(ctx, js, names, revocations.WithReplicas(r), revocations.WithLogger(o.log))
			return err
		}},
		{"signals", func(ctx context.Context) (err error) {
			s.Signals, err = signals.Open(ctx, js, names, signals.WithReplicas(r), signals.WithLogger(o.log))
			return err
		}},
		{"watchers", func(ctx context.Context) (err error) {
			s.Watchers, err = watchers.Open(ctx, js, names, watchers.WithReplicas(r))
			return err
		}},
		{"events", func(ctx context.Context) (err error) {
			s.Events, err = events.Open(ctx, js, names, events.WithReplicas(r))
			return err
		}},
		{"archives", func(ctx context.Context) (err error) {
			s.Archives, err = archives.Open(ctx, js, names, archives.WithReplicas(r))
			return err
		}},
		// workers deliver too: the answer to a human's /goal message
		{"deliveries", func(ctx context.Context) (err error) {
			s.Deliveries, err = deliveries.Open(ctx, js, names, deliveries.WithReplicas(r), deliveries.WithMaxAge(cfg.DeliverMaxAge))
			return err
		}},
		{"dead letters", func(ctx context.Context) (err error) {
			s.DeadLetters, err = deadletters.Open(ctx, js, names, r)
			return err
		}},
	}
	if o.gateway {
		steps = append(steps, step{"a2a", func(ctx context.Context) (err error) {
			s.A2A, err = a2a.Open(ctx, js, names, a2a.WithReplicas(r), a2a.WithMaxAge(cfg.RunRecordMaxAge))
			return err
		}})
	}
	for _, st := range steps {
		if err := RetryTransient(ctx, o.logger(), st.what, st.open); err != nil {
			return err
		}
	}
	return nil
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
