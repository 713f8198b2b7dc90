package console

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/ops/metrics"
)

// The ops page's charts: the Prometheus figures of the workers and
// gateways (--metrics-from, read from their /metrics as Prometheus would),
// and the run queue's figures, which the console reads from the server
// with the collector a worker's /metrics uses. A few minutes of samples
// are kept in memory; the page draws them.

const (
	chartEvery  = 5 * time.Second
	chartPoints = 120 // ten minutes at chartEvery
)

// BusSource names the run queue's figures, read by the console itself.
const BusSource = "bus"

// Chart is one figure of one source over the last minutes.
type Chart struct {
	Source string `json:"source"`
	metrics.Figure
	At     []int64   `json:"at"` // unix ms
	Values []float64 `json:"values"`
	rank   int
}

// Charts is the ops page's chart data.
type Charts struct {
	Every  int64             `json:"everyMs"`
	Charts []*Chart          `json:"charts"`
	Errors map[string]string `json:"errors,omitempty"` // by source: its last read failed
}

type charts struct {
	mu     sync.Mutex
	byKey  map[string]*Chart
	order  []string
	prev   map[string]float64 // counters' last totals, by key
	prevAt map[string]int64
	errs   map[string]string
}

func (s *Server) startCharts(ctx context.Context) *charts {
	c := &charts{byKey: map[string]*Chart{}, prev: map[string]float64{}, prevAt: map[string]int64{}, errs: map[string]string{}}
	m := metrics.New()
	m.WatchQueue(s.js, s.o.Names, s.log)
	hc := &http.Client{Timeout: 3 * time.Second}
	read := func() {
		now := time.Now().UnixMilli()
		if fams, err := m.Registry().Gather(); err == nil {
			// only the run queue's: the rest of the console's registry
			// counts nothing, or the console process itself
			local := map[string]float64{}
			for k, v := range metrics.Sum(fams) {
				if strings.HasPrefix(k, "sessionbus_run_queue_") {
					local[k] = v
				}
			}
			c.add(0, BusSource, local, now, nil)
		}
		for i, addr := range s.o.MetricsFrom {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			v, err := metrics.Scrape(rctx, hc, addr)
			cancel()
			c.add(i+1, addr, v, now, err)
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(chartEvery)
		defer t.Stop()
		for {
			read()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return c
}

// add records one read of source, the rank-th (the page shows the
// sources in order, each's figures in Figures' order).
func (c *charts) add(rank int, source string, v map[string]float64, at int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errs[source] = err.Error()
		return
	}
	delete(c.errs, source)
	for fi, f := range metrics.Figures {
		x, ok := v[f.Name]
		if !ok {
			continue
		}
		key := source + "\x00" + f.Name
		if f.Rate {
			last, seen := c.prev[key]
			lastAt := c.prevAt[key]
			c.prev[key], c.prevAt[key] = x, at
			if !seen || at <= lastAt {
				continue
			}
			// a restarted process starts its counters at zero again
			x = max(x-last, 0) / (float64(at-lastAt) / 1000)
		}
		ch := c.byKey[key]
		if ch == nil {
			ch = &Chart{Source: source, Figure: f, rank: rank*len(metrics.Figures) + fi}
			c.byKey[key] = ch
			c.order = append(c.order, key)
			slices.SortFunc(c.order, func(a, b string) int { return cmp.Compare(c.byKey[a].rank, c.byKey[b].rank) })
		}
		ch.At = append(ch.At, at)
		ch.Values = append(ch.Values, x)
		if len(ch.At) > chartPoints {
			ch.At, ch.Values = ch.At[1:], ch.Values[1:]
		}
	}
}

// snapshot copies the charts for one reply.
func (c *charts) snapshot() Charts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Charts{Every: chartEvery.Milliseconds(), Charts: make([]*Chart, 0, len(c.order))}
	for _, k := range c.order {
		ch := *c.byKey[k]
		ch.At, ch.Values = append([]int64(nil), ch.At...), append([]float64(nil), ch.Values...)
		out.Charts = append(out.Charts, &ch)
	}
	if len(c.errs) > 0 {
		out.Errors = map[string]string{}
		for k, v := range c.errs {
			out.Errors[k] = v
		}
	}
	return out
}

func (s *Server) handleCharts(w http.ResponseWriter, r *http.Request) {
	if userOf(r).Token != "" {
		writeError(w, http.StatusForbidden, "the charts need a credentials login (admin or ops): a token login sees sessions only")
		return
	}
	writeJSON(w, http.StatusOK, s.charts.snapshot())
}
