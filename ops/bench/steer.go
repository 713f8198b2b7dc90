package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The steer benchmark: a message steered into a running turn of an
// openai agent, against a stub model in this process, two gateways.

const (
	steerAgent = "steerbench"
	steerKey   = "agent:" + steerAgent + ":bench:steer"
)

// steerBenchAgent is the openai agent whose turns steer_latency steers.
// The worker's config lists it too (env.go): a worker steers only into
// an agent whose runtime can take it; there its baseURL is never called.
func steerBenchAgent(baseURL string) config.Agent {
	return config.Agent{ID: steerAgent, Runtime: "openai", OpenAI: map[string]any{"baseURL": baseURL, "model": "stub"}}
}

// steerStub is the model: a turn's first request is held until the bench
// releases it, then asks for one tool call; the request that holds the
// steered message is reported and answered with text at once.
type steerStub struct {
	held    chan chan struct{} // a turn's first request, waiting for release
	steered chan string        // the steered message, as its request arrives
}

func (s *steerStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body struct {
		Messages []struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(raw, &body)
	last := ""
	if n := len(body.Messages); n > 0 && body.Messages[n-1].Content != nil {
		last = *body.Messages[n-1].Content
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasPrefix(last, "work"):
		release := make(chan struct{})
		s.held <- release
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"sessions_list","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)
	case strings.HasPrefix(last, "steer "):
		s.steered <- last
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	default:
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}
}

// steer_latency: per op, a human turn is queued (sb.inbound) in a session
// of its own and its first
// model request held (untimed); a second message to the session is
// steered in through the ingress, and once the ingress answers it
// "steered" (accepted: in the running run's record) the model answers the
// held request at once with a tool call. The span runs from that answer
// to the model's next request holding the message: the gateway's check
// before the call (which skips it), its read of the record, the message
// written to the transcript, the request sent.
func runSteerLatency(ctx context.Context, e *env) (Result, error) {
	cctx, cancel := opCtx(ctx)
	defer cancel()
	store, err := sessions.Open(cctx, e.js, e.names)
	if err != nil {
		return Result{}, err
	}
	stub := &steerStub{held: make(chan chan struct{}, 1), steered: make(chan string, 1)}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	stopGWs, err := e.steerGateways(ctx, srv.URL+"/v1")
	if err != nil {
		return Result{}, err
	}
	defer stopGWs()
	adapter, err := e.op.Mint(bus.Caller{Adapter: inboundChannel}, 24*time.Hour)
	if err != nil {
		return Result{}, err
	}
	runsRec, err := runs.Open(cctx, e.js, e.names)
	if err != nil {
		return Result{}, err
	}
	defer runsRec.Close()
	var key string
	msg := func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"sessionKey": key, "channel": inboundChannel, "from": "u1", "text": text})
		return b
	}
	i := 0
	var replyBytes int
	r, err := measureSpans(ctx, e.sz.send, func() (time.Duration, error) {
		i++
		// a session per op: a turn of the openai runtime reads its whole
		// context, which would grow with every op in one session
		key = fmt.Sprintf("%s:%d", steerKey, i)
		if err := ensureSession(cctx, store, key, steerAgent); err != nil {
			return 0, err
		}
		out, err := bus.Inbound(cctx, e.nc, e.names, adapter, msg(fmt.Sprintf("work %d", i)))
		if err != nil {
			return 0, err
		}
		var acc struct{ Status, RunID string }
		if err := json.Unmarshal(out, &acc); err != nil || acc.Status != "accepted" {
			return 0, fmt.Errorf("inbound reply %.300s (%v), want accepted", out, err)
		}
		var release chan struct{}
		select {
		case release = <-stub.held:
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("run %s: the model was never asked", acc.RunID)
		}
		text := fmt.Sprintf("steer %d", i)
		out, err = bus.Inbound(cctx, e.nc, e.names, adapter, msg(text))
		if err != nil {
			return 0, err
		}
		var st struct{ Status, RunID string }
		if err := json.Unmarshal(out, &st); err != nil || st.Status != "steered" || st.RunID != acc.RunID {
			return 0, fmt.Errorf("steer reply %.300s (%v), want steered into run %s", out, err, acc.RunID)
		}
		replyBytes = len(out)
		t0 := time.Now()
		close(release)
		var span time.Duration
		select {
		case got := <-stub.steered:
			span = time.Since(t0)
			if got != text {
				return 0, fmt.Errorf("the model got %q, want %q", got, text)
			}
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("run %s: the steered message never reached the model", acc.RunID)
		}
		// untimed: the turn ends before the next op's begins
		wctx, wcancel := context.WithTimeout(cctx, 30*time.Second)
		defer wcancel()
		rec, err := runsRec.Wait(wctx, acc.RunID)
		if err != nil || rec.Status != runs.OK {
			return 0, fmt.Errorf("run %s: %+v %v", acc.RunID, rec, err)
		}
		return span, nil
	})
	r.Dataset = "ingress answered steered → the running turn's next model request holds the message, 2 gateways, openai runtime against an in-process stub answering at once"
	r.ReplyBytes = replyBytes
	return r, err
}

// steerGateways starts two gateways whose agent steerbench calls baseURL.
func (e *env) steerGateways(ctx context.Context, baseURL string) (stop func(), err error) {
	cfg := *e.cfg
	cfg.Agents.List = []config.Agent{{ID: "main", Runtime: "script"}, steerBenchAgent(baseURL)}
	return e.startGateways(ctx, 2, "bench-steer-gw", &cfg, gateway.Options{})
}
