package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Figure is one number a chart of a worker or gateway follows: a family
// of this package's metrics (or the process collectors') summed over its
// labels.
type Figure struct {
	Name string `json:"name"` // the metric family, e.g. sessionbus_runs_total
	Help string `json:"help"`
	// Rate says the family is a counter: a chart shows its rise per
	// second between two reads, not the running total.
	Rate bool `json:"rate,omitempty"`
}

// Figures are what the console charts, in its order.
var Figures = []Figure{
	{Name: namespace + "_tool_requests_total", Help: "tool requests answered per second", Rate: true},
	{Name: namespace + "_tool_errors_total", Help: "tool requests answered with an error per second", Rate: true},
	{Name: namespace + "_runs_in_flight", Help: "runs the gateway's executors hold"},
	{Name: namespace + "_runs_total", Help: "run requests taken per second", Rate: true},
	{Name: namespace + "_deliveries_total", Help: "announces and notices delivered per second", Rate: true},
	{Name: namespace + "_delivery_failures_total", Help: "failed deliveries per second", Rate: true},
	{Name: namespace + "_run_queue_messages", Help: "messages in the run queue stream"},
	{Name: namespace + "_run_queue_consumer_lag", Help: "run requests no gateway has been given yet"},
	{Name: namespace + "_run_queue_ack_pending", Help: "run requests given to gateways, not yet acked"},
	{Name: "go_goroutines", Help: "goroutines"},
	{Name: "process_resident_memory_bytes", Help: "resident memory, bytes"},
}

// Sum is each family's value summed over its labels (a histogram's or
// summary's count), for the families in Figures that are present.
func Sum(families []*dto.MetricFamily) map[string]float64 {
	want := map[string]bool{}
	for _, f := range Figures {
		want[f.Name] = true
	}
	out := map[string]float64{}
	for _, fam := range families {
		if !want[fam.GetName()] {
			continue
		}
		var v float64
		for _, m := range fam.GetMetric() {
			switch {
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Untyped != nil:
				v += m.Untyped.GetValue()
			case m.Histogram != nil:
				v += float64(m.Histogram.GetSampleCount())
			case m.Summary != nil:
				v += float64(m.Summary.GetSampleCount())
			}
		}
		out[fam.GetName()] = v
	}
	return out
}

// Scrape reads the /metrics of a worker or gateway (addr is host:port,
// as --metrics takes it, or a URL) and sums the Figures in it.
func Scrape(ctx context.Context, hc *http.Client, addr string) (map[string]float64, error) {
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + addr + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// the text format: it parses without the protobuf negotiation
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
		return nil, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	list := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		list = append(list, f)
	}
	return Sum(list), nil
}
