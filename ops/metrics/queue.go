package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionbus/sessionbus/bus"
)

// scrapeTimeout bounds the JetStream look-ups of one scrape.
const scrapeTimeout = 3 * time.Second

// queueCollector reads the run queue's depth and the shared gateway
// consumer's lag from the server at each scrape: they are the server's
// numbers, the same whichever process is scraped.
type queueCollector struct {
	js    jetstream.JetStream
	names bus.Names
	log   *slog.Logger

	depth, lag, ackPending, redelivered, up *prometheus.Desc
}

// WatchQueue adds the run queue's gauges (SB_RUNS and its `gateways`
// consumer), read at each scrape through js.
func (m *Metrics) WatchQueue(js jetstream.JetStream, names bus.Names, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, nil, nil)
	}
	m.reg.MustRegister(&queueCollector{
		js: js, names: names, log: log,
		depth:       d("run_queue_messages", "Messages in the run queue stream (SB_RUNS), acked ones not yet trimmed included."),
		lag:         d("run_queue_consumer_lag", "Run requests no gateway has been given yet (the gateways consumer's pending count)."),
		ackPending:  d("run_queue_ack_pending", "Run requests given to gateways and not yet acked."),
		redelivered: d("run_queue_redelivered", "Run requests the gateways consumer is redelivering now."),
		up:          d("run_queue_up", "1 when the last scrape read the run queue and its consumer, else 0."),
	})
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.lag, c.ackPending, c.redelivered, c.up} {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	up := 0.0
	defer func() { ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up) }()
	st, err := c.js.Stream(ctx, c.names.RunsStream())
	if err != nil {
		c.log.Debug("metrics: run queue stream", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(st.CachedInfo().State.Msgs))
	cons, err := st.Consumer(ctx, c.names.GatewaysConsumer())
	if err != nil {
		// no gateway has bound yet: nothing is consumed, everything lags
		c.log.Debug("metrics: gateways consumer", "err", err)
		return
	}
	ci := cons.CachedInfo()
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(ci.NumPending))
	ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, float64(ci.NumAckPending))
	ch <- prometheus.MustNewConstMetric(c.redelivered, prometheus.GaugeValue, float64(ci.NumRedelivered))
	up = 1
}
