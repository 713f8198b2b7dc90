// Package metrics exports what a worker or gateway does as Prometheus
// metrics, and serves them with the health checks on one HTTP listener
// (`--metrics 127.0.0.1:PORT`). The tool service and the gateway report
// through small observer interfaces (bus.ToolObserver, gateway.Observer)
// that Metrics implements; queue depth and consumer lag are read from the
// server at each scrape.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sessionbus/sessionbus/handlers/quota"
)

// namespace prefixes every metric name.
const namespace = "sessionbus"

// latencyBuckets span a cached read (sub-millisecond) to a send waiting on
// a model turn (a minute).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Metrics holds one process's metrics. Its methods are safe for concurrent
// use; a process makes one and hands it to its worker and gateway.
type Metrics struct {
	reg *prometheus.Registry

	requests     *prometheus.CounterVec
	errors       *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	runsInFlight prometheus.Gauge
	runs         *prometheus.CounterVec
	redeliveries prometheus.Counter
	deliveries   *prometheus.CounterVec
	failures     *prometheus.CounterVec
	refused      *prometheus.CounterVec
	quota        *prometheus.CounterVec
}

// New makes the metrics, with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "tool_requests_total",
			Help: "Tool requests answered, by tool (the counts `nats micro stats sessionbus` shows).",
		}, []string{"tool"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "tool_errors_total",
			Help: "Tool requests answered with a thrown error, by tool and error code.",
		}, []string{"tool", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "tool_latency_seconds",
			Help:    "Time from a tool request's arrival until its reply was sent, by tool.",
			Buckets: latencyBuckets,
		}, []string{"tool"}),
		runsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "runs_in_flight",
			Help: "Run requests this gateway's executors hold now.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "runs_total",
			Help: "Run requests this gateway took, by outcome (ok, busy, failed, stopping, malformed).",
		}, []string{"outcome"}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "run_redeliveries_total",
			Help: "Run requests this gateway received that the server had delivered before.",
		}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "deliveries_total",
			Help: "Announces and notices this gateway claimed and queued, by kind.",
		}, []string{"kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "delivery_failures_total",
			Help: "Failed delivery attempts of announces and notices this gateway claimed, by kind.",
		}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "replies_refused_total",
			Help: "Requests dropped unanswered because their reply subject was not an inbox, by endpoint (\"\" for an unknown tool or a monitoring verb).",
		}, []string{"endpoint"}),
		quota: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "quota_refused_total",
			Help: "Tool calls and runs refused with 429 because their caller was over a quota, by quota (the key under quotas).",
		}, []string{"kind"}),
	}
	m.reg.MustRegister(m.requests, m.errors, m.latency, m.runsInFlight, m.runs, m.redeliveries, m.deliveries, m.failures, m.refused, m.quota,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every kind appears from the start, at zero, so a rate() over the
	// first failure is not lost.
	for _, k := range []string{"announce", "notice"} {
		m.deliveries.WithLabelValues(k)
		m.failures.WithLabelValues(k)
	}
	for _, k := range quota.Kinds {
		m.quota.WithLabelValues(k)
	}
	return m
}

// Registry is where the metrics are registered (for tests and for
// collectors of other packages).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ToolDone implements bus.ToolObserver.
func (m *Metrics) ToolDone(tool string, took time.Duration, code string) {
	m.requests.WithLabelValues(tool).Inc()
	m.latency.WithLabelValues(tool).Observe(took.Seconds())
	if code != "" {
		if _, err := strconv.Atoi(code); err != nil {
			code = "other" // bound the label's values
		}
		m.errors.WithLabelValues(tool, code).Inc()
	}
}

// ReplyRefused implements bus.ToolObserver.
func (m *Metrics) ReplyRefused(endpoint string) { m.refused.WithLabelValues(endpoint).Inc() }

// QuotaRefused implements quota.Observer.
func (m *Metrics) QuotaRefused(kind string) { m.quota.WithLabelValues(kind).Inc() }

// RunStarted implements gateway.Observer.
func (m *Metrics) RunStarted() { m.runsInFlight.Inc() }

// RunDone implements gateway.Observer.
func (m *Metrics) RunDone(outcome string) {
	m.runsInFlight.Dec()
	m.runs.WithLabelValues(outcome).Inc()
}

// Redelivered implements gateway.Observer.
func (m *Metrics) Redelivered() { m.redeliveries.Inc() }

// Delivered implements gateway.Observer.
func (m *Metrics) Delivered(kind string, err error) {
	if err != nil {
		m.failures.WithLabelValues(kind).Inc()
		return
	}
	m.deliveries.WithLabelValues(kind).Inc()
}
