package main

import (
	"flag"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/ops/metrics"
)

// metricsFlag is --metrics of serve, worker and gateway.
func metricsFlag(fs *flag.FlagSet) *string {
	return fs.String("metrics", "", "serve Prometheus /metrics, /healthz and /readyz on this host:port (e.g. 127.0.0.1:9464); off when empty")
}

// procMetrics is a process's metrics and their listener; the zero value
// (no --metrics) observes nothing.
type procMetrics struct {
	m   *metrics.Metrics
	srv *metrics.Server
}

// startMetrics starts the listener of --metrics addr, if one was given.
func startMetrics(addr string, nc *nats.Conn, cfg *config.Config, log *slog.Logger) (*procMetrics, error) {
	if addr == "" {
		return &procMetrics{}, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	names := bus.NewNames(cfg.Bus.Prefix)
	m := metrics.New()
	m.WatchQueue(js, names, log)
	srv, err := metrics.Serve(addr, m, metrics.Ready(nc, js, names), log)
	if err != nil {
		return nil, err
	}
	log.Info("metrics listening", "addr", "http://"+srv.Addr()+"/metrics")
	return &procMetrics{m: m, srv: srv}, nil
}

// worker is the worker option reporting tool requests, if any.
func (p *procMetrics) worker() []handlers.WorkerOption {
	if p.m == nil {
		return nil
	}
	return []handlers.WorkerOption{handlers.WithToolObserver(p.m)}
}

// gateway is the gateway's observer, nil without --metrics.
func (p *procMetrics) gateway() gateway.Observer {
	if p.m == nil {
		return nil
	}
	return p.m
}

func (p *procMetrics) close() { p.srv.Close() }
