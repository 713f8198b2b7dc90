package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/sanitize"
	"github.com/sessionbus/sessionbus/kv"
	"github.com/sessionbus/sessionbus/streams"
)

// Worker is one stateless tool worker: a micro service instance plus the
// index it lists from. Any number may run against one NATS deployment.
type Worker struct {
	Deps *Deps
	svc  *bus.Service
}

// StartWorker creates the streams and buckets it needs (idempotently),
// loads the session index and starts answering tool requests.
func StartWorker(ctx context.Context, nc *nats.Conn, cfg *config.Config, v *bus.Verifier, log *slog.Logger) (*Worker, error) {
	if log == nil {
		log = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	names := bus.NewNames(cfg.Bus.Prefix)
	store, err := kv.OpenStore(ctx, js, names, kv.WithReplicas(cfg.Bus.Replicas))
	if err != nil {
		return nil, err
	}
	tr, err := streams.OpenTranscripts(ctx, nc, js, names, streams.WithReplicas(cfg.Bus.Replicas))
	if err != nil {
		return nil, err
	}
	runs, err := streams.OpenRuns(ctx, js, names, cfg.Bus.Replicas)
	if err != nil {
		return nil, err
	}
	red, err := sanitize.NewRedactor(cfg.Logging.RedactSensitive, cfg.Logging.RedactPatterns)
	if err != nil {
		return nil, fmt.Errorf("config logging.redactPatterns: %w", err)
	}
	idx, err := kv.StartIndex(ctx, js, store, log, IndexDerive(cfg))
	if err != nil {
		return nil, err
	}
	d := &Deps{Config: cfg, Names: names, Store: store, Index: idx, Transcripts: tr, Runs: runs, Redactor: red, Log: log, Now: time.Now}
	svc, err := bus.Serve(nc, Tools(d), bus.ServiceOptions{Names: names, Verifier: v, Logger: log})
	if err != nil {
		idx.Stop()
		return nil, err
	}
	return &Worker{Deps: d, svc: svc}, nil
}

// Stop drains in-flight requests, then stops following the index.
func (w *Worker) Stop() {
	w.svc.Stop()
	w.Deps.Runs.Close()
	w.Deps.Index.Stop()
}
