package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
)

// registry is what an Observer that keeps a Prometheus registry offers
// (ops/metrics.Metrics does): the gateway adds its own collectors to it.
type registry interface {
	Registry() *prometheus.Registry
}

// registerMetrics adds the context cache's figures to the observer's
// registry, if it has one, labelled with the gateway's id so that several
// gateways in one process (tenants) each report theirs.
func (g *Gateway) registerMetrics(o Observer) {
	reg, ok := o.(registry)
	if !ok || g.ctxCache == nil || reg.Registry() == nil {
		return
	}
	r := prometheus.WrapRegistererWith(prometheus.Labels{"gateway": g.id}, reg.Registry())
	col := ctxCollector{g}
	if err := r.Register(col); err != nil {
		g.log.Warn("gateway: context cache metrics not registered (another gateway with this id in the process?)", "err", err)
		return
	}
	g.unregister = func() { r.Unregister(col) }
}

var (
	ctxDescs = struct {
		hits, misses, rebuilds, evictions, read, bytes, maxBytes, sessions, entries *prometheus.Desc
	}{
		hits:      ctxDesc("hits_total", "Turn contexts served from the gateway's context cache plus the entries appended since."),
		misses:    ctxDesc("misses_total", "Turn contexts read afresh because the cache held none for the session."),
		rebuilds:  ctxDesc("rebuilds_total", "Turn contexts read afresh because the one cached could not be vouched for (compaction, reset, rewrite, recreated stream)."),
		evictions: ctxDesc("evictions_total", "Session contexts dropped to stay under bus.contextCacheBytes."),
		read:      ctxDesc("entries_read_total", "Transcript entries fetched to build turn contexts, cache hits and fresh reads together."),
		bytes:     ctxDesc("bytes", "Bytes the context cache holds: entries plus overheads."),
		maxBytes:  ctxDesc("max_bytes", "The context cache's bound (bus.contextCacheBytes)."),
		sessions:  ctxDesc("sessions", "Sessions whose context the cache holds."),
		entries:   ctxDesc("entries", "Transcript entries the context cache holds, over every session."),
	}
)

func ctxDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("sessionbus_context_cache_"+name, help, nil, nil)
}

// ctxCollector reads the cache's figures at each scrape.
type ctxCollector struct{ g *Gateway }

func (ctxCollector) Describe(ch chan<- *prometheus.Desc) {
	d := ctxDescs
	for _, x := range []*prometheus.Desc{d.hits, d.misses, d.rebuilds, d.evictions, d.read, d.bytes, d.maxBytes, d.sessions, d.entries} {
		ch <- x
	}
}

func (k ctxCollector) Collect(ch chan<- prometheus.Metric) {
	s, d := k.g.ContextCacheStats(), ctxDescs
	counter := func(desc *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v))
	}
	gauge := func(desc *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(v))
	}
	counter(d.hits, s.Hits)
	counter(d.misses, s.Misses)
	counter(d.rebuilds, s.Rebuilds)
	counter(d.evictions, s.Evictions)
	counter(d.read, s.EntriesRead)
	gauge(d.bytes, s.Bytes)
	gauge(d.maxBytes, s.MaxBytes)
	gauge(d.sessions, s.Sessions)
	gauge(d.entries, s.Entries)
}
