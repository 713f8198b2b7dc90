package metrics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/handlers/quota"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/ops/metrics"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

func TestMain(m *testing.M) {
	os.Exit(bustest.CheckLeaks(m.Run()))
}

const caller = "agent:main:main"

// scrape reads /metrics as "name{labels}" -> value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", res.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// serve starts a metrics listener for the test.
func serve(t *testing.T, m *metrics.Metrics, ready metrics.ReadyFunc) *metrics.Server {
	t.Helper()
	srv, err := metrics.Serve("127.0.0.1:0", m, ready, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestMetricsThroughServer: tool requests, errors and latencies, runs and
// the queue gauges move by exactly what was done, read through /metrics;
// the tool counts equal `nats micro stats`.
func TestMetricsThroughServer(t *testing.T) {
	m := metrics.New()
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script"}}
		c.Session.AgentToAgent.MaxPingPongTurns = 0
	}, handlers.WithToolObserver(m))
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	names := s.Worker.Deps.Names
	m.WatchQueue(js, names, nil)
	srv := serve(t, m, metrics.Ready(s.Conn, js, names))

	if code, body := get(t, "http://"+srv.Addr()+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, "http://"+srv.Addr()+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with every stream present: %d %q", code, body)
	}

	before := scrape(t, srv.Addr())
	for range 3 {
		s.MustCall(caller, "sessions_list", `{}`)
	}
	if _, err := s.Call(caller, "sessions_history", `{}`); err == nil {
		t.Fatal("sessions_history without sessionKey succeeded")
	} else if e, ok := bus.AsError(err); !ok || e.Code != 400 {
		t.Fatalf("sessions_history without sessionKey: %v", err)
	}
	wants := map[string]float64{
		`sessionbus_tool_requests_total{tool="sessions_list"}`:                   3,
		`sessionbus_tool_requests_total{tool="sessions_history"}`:                1,
		`sessionbus_tool_errors_total{code="400",tool="sessions_history"}`:       1,
		`sessionbus_tool_latency_seconds_count{tool="sessions_list"}`:            3,
		`sessionbus_tool_latency_seconds_bucket{tool="sessions_list",le="+Inf"}`: 3,
		`sessionbus_tool_latency_seconds_count{tool="sessions_history"}`:         1,
		`sessionbus_tool_errors_total{code="400",tool="sessions_list"}`:          0,
	}
	// The service records a request just after it sends the reply, so the
	// last call's counts can land a moment after the caller has its answer:
	// scrape until they all moved as expected (or a deadline), then check.
	var after map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; {
		after = scrape(t, srv.Addr())
		moved := true
		for name, want := range wants {
			moved = moved && after[name]-before[name] == want
		}
		if moved || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // between scrapes, not a sync: the loop waits on the counts
	}
	for name, want := range wants {
		if got := after[name] - before[name]; got != want {
			t.Errorf("%s moved by %v, want %v", name, got, want)
		}
	}

	// the same counts as `nats micro stats sessionbus`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := s.Conn.RequestWithContext(ctx, micro.APIPrefix+".STATS."+bus.ServiceName, nil)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	for _, ep := range st.Endpoints {
		if got := after[`sessionbus_tool_requests_total{tool="`+ep.Name+`"}`]; got != float64(ep.NumRequests) {
			t.Errorf("%s: /metrics counts %v requests, micro stats %d", ep.Name, got, ep.NumRequests)
		}
	}

	// one run through a gateway
	gw, err := gateway.StartWithOptions(ctx, s.Conn, s.Config, s.Operator, "gw-metrics", nil, gateway.Options{Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Stop()
	before = scrape(t, srv.Addr())
	req := &runqueue.Request{RunID: "run-metrics-1", SessionKey: "agent:main:metrics", AgentID: "main",
		Message: "hello", Prompt: "hello", ChainID: "chain", CreatedAt: time.Now().UnixMilli()}
	rec := &runs.Record{RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, Status: runs.Pending, CreatedAt: req.CreatedAt}
	if err := submit.Run(ctx, gw.Queue(), gw.Runs(), req, rec); err != nil {
		t.Fatal(err)
	}
	if got, err := gw.Runs().Wait(ctx, req.RunID); err != nil || got.Status != runs.OK {
		t.Fatalf("run: %+v %v", got, err)
	}
	var last map[string]float64
	bustest.WaitFor(t, 10*time.Second, "the run counted done and acked", func() bool {
		last = scrape(t, srv.Addr())
		return last[`sessionbus_runs_total{outcome="ok"}`]-before[`sessionbus_runs_total{outcome="ok"}`] == 1 &&
			last["sessionbus_run_queue_ack_pending"] == 0
	})
	for name, want := range map[string]float64{
		"sessionbus_runs_in_flight":         0,
		"sessionbus_run_queue_consumer_lag": 0,
		"sessionbus_run_queue_up":           1,
	} {
		if got := last[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := last["sessionbus_run_redeliveries_total"] - before["sessionbus_run_redeliveries_total"]; got != 0 {
		t.Errorf("redeliveries moved by %v for a run delivered once", got)
	}
}

// TestDeliveryCounters: the gateway observer's delivery and redelivery
// calls land in /metrics by kind.
func TestDeliveryCounters(t *testing.T) {
	m := metrics.New()
	srv := serve(t, m, func(context.Context) error { return nil })
	var obs gateway.Observer = m
	obs.Delivered("announce", nil)
	obs.Delivered("announce", nil)
	obs.Delivered("notice", errors.New("store down"))
	obs.Redelivered()
	obs.RunStarted()
	got := scrape(t, srv.Addr())
	for name, want := range map[string]float64{
		`sessionbus_deliveries_total{kind="announce"}`:        2,
		`sessionbus_deliveries_total{kind="notice"}`:          0,
		`sessionbus_delivery_failures_total{kind="announce"}`: 0,
		`sessionbus_delivery_failures_total{kind="notice"}`:   1,
		"sessionbus_run_redeliveries_total":                   1,
		"sessionbus_runs_in_flight":                           1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

// TestQuotaRefusals: every quota kind is exported from the start, at zero,
// and a refusal reported through quota.Observer counts under its kind.
func TestQuotaRefusals(t *testing.T) {
	m := metrics.New()
	srv := serve(t, m, func(context.Context) error { return nil })
	var obs quota.Observer = m
	obs.QuotaRefused(quota.RunsPerSession)
	obs.QuotaRefused(quota.RunsPerSession)
	got := scrape(t, srv.Addr())
	for _, k := range quota.Kinds {
		name, want := `sessionbus_quota_refused_total{kind="`+k+`"}`, 0.0
		if k == quota.RunsPerSession {
			want = 2
		}
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (exported %v), want %v", name, v, ok, want)
		}
	}
}

// TestReadyz: a process whose connection is closed is not ready, and says
// why.
func TestReadyz(t *testing.T) {
	s := bustest.Server(t)
	nc, err := nats.Connect(s.URL(), bustest.Options(t, s.Deployment())...)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	srv := serve(t, metrics.New(), metrics.Ready(nc, js, bus.NewNames("")))
	// connected, but no worker created the streams yet
	if code, body := get(t, "http://"+srv.Addr()+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "stream SB_RUNS") {
		t.Fatalf("/readyz without streams: %d %q", code, body)
	}
	nc.Close()
	if code, body := get(t, "http://"+srv.Addr()+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "CLOSED") {
		t.Fatalf("/readyz after close: %d %q", code, body)
	}
	if code, _ := get(t, "http://"+srv.Addr()+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
}
