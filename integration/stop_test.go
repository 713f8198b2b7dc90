package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
)

// stopAckWait is the gateways' ack wait in the stop tests: short, so that
// waiting past it for a redelivery that must not come stays quick.
const stopAckWait = 2 * time.Second

// slowModel makes stub stream its first turn slowly: one delta (partial),
// flushed, then nothing until the client goes away, which closes
// cancelled. Later requests are answered as usual.
func slowModel(stub *modelStub, partial string) (streaming, cancelled chan struct{}, requests *atomic.Int32) {
	streaming, cancelled = make(chan struct{}), make(chan struct{})
	requests = new(atomic.Int32)
	stub.hold = func(w http.ResponseWriter, r *http.Request, summary bool) bool {
		if summary || requests.Add(1) != 1 {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": partial}}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
		close(streaming)
		<-r.Context().Done() // the provider connection closes: the gateway cancelled it
		close(cancelled)
		return true
	}
	return streaming, cancelled, requests
}

// stopStack is a worker and two gateways (gw-a, gw-b) on one server, agent
// oa on the openai runtime against stub, and the session turnsTarget.
func stopStack(t *testing.T, stub *modelStub) *handlerstest.Stack {
	t.Helper()
	t.Setenv("SB_TEST_OPENAI_KEY", "sk-test-stop")
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Tools.AgentToAgent.Allow = []string{"*"}
		c.Session.AgentToAgent.MaxPingPongTurns = 0
		c.Agents.List = []config.Agent{
			scriptAgent("main", map[string]any{"reply": "REPLY_SKIP"}),
			{ID: "oa", Runtime: "openai", OpenAI: map[string]any{
				"baseURL": stub.srv.URL + "/v1", "model": "stub", "apiKeyEnv": "SB_TEST_OPENAI_KEY",
			}},
		}
	})
	for _, id := range []string{"gw-a", "gw-b"} {
		gatewaytest.Start(t, s, s.Conn, id, nil, gateway.Options{AckWait: stopAckWait})
	}
	seedLines(s, turnsTarget, 2, 10)
	return s
}

// TestStopAbortsTheRunningTurn: a stop sent through a worker's ops subject
// ends a turn streaming on either of two gateways: the provider request is
// cancelled, the run record ends aborted with its one attempt, its message
// is acked (no second request to the model past the ack wait), the text
// streamed so far is the transcript's reply (stopReason aborted), and the
// session entry says abortedLastRun. A second stop finds nothing running
// and writes nothing.
func TestStopAbortsTheRunningTurn(t *testing.T) {
	stub := newModelStub(t, true)
	streaming, cancelled, requests := slowModel(stub, "PARTIAL-ANSWER")
	s := stopStack(t, stub)
	res := s.MustCall(mainKey, "sessions_send", `{"sessionKey":"`+turnsTarget+`","message":"write a long essay","timeoutSeconds":0}`)
	runID, _ := res["runId"].(string)
	if runID == "" {
		t.Fatalf("send: %v", res)
	}
	select {
	case <-streaming:
	case <-time.After(30 * time.Second):
		t.Fatal("the model was never asked")
	}
	// the partial delta reached the gateway before the stop: it streams
	// live, and the live subject is the gateway's, not the stub's
	bustest.WaitFor(t, 10*time.Second, "the run recorded running", func() bool {
		rec, _, err := s.Worker.Deps.Runs.Get(context.Background(), runID)
		return err == nil && rec.Status == runs.Running
	})

	ops := s.Token(bus.Caller{Adapter: bus.AnyChannel})
	body := []byte(`{"sessionKey":"` + turnsTarget + `"}`)
	reply, err := bus.SessionOp(bustest.Context(t), s.Conn, s.Worker.Deps.Names, "stop", ops, body)
	var out handlers.StopResult
	if err != nil || json.Unmarshal(reply, &out) != nil || out.Status != "aborted" || out.RunID != runID || out.Text != handlers.StopReplyText {
		t.Fatalf("stop: %s %v", reply, err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider request was not cancelled")
	}
	rec := runstest.WaitRun(t, s.Worker.Deps.Runs, runID, 10*time.Second)
	if rec.Status != runs.Aborted || rec.Attempts != 1 {
		t.Fatalf("run record: %+v", rec)
	}
	// the turn's reply frees the session; then the entry says it was aborted
	var reply0 map[string]any
	bustest.WaitFor(t, 10*time.Second, "the aborted turn's reply in the transcript", func() bool {
		reply0 = runPart(t, s, turnsTarget, runID, "reply")
		return reply0 != nil
	})
	if reply0["content"] != "PARTIAL-ANSWER" || reply0["stopReason"] != "aborted" || reply0["role"] != "assistant" {
		t.Fatalf("aborted reply: %v", reply0)
	}
	bustest.WaitFor(t, 10*time.Second, "abortedLastRun on the session", func() bool {
		e, _, err := s.Worker.Deps.Store.Get(context.Background(), turnsTarget)
		return err == nil && e.AbortedLastRun
	})
	// acked: nothing is pending on the run queue, and past the ack wait
	// the model is asked nothing more
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, 10*time.Second, "the run's message acked", func() bool {
		c, err := js.Consumer(context.Background(), s.Worker.Deps.Names.RunsStream(), s.Worker.Deps.Names.GatewaysConsumer())
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	deadline := time.After(stopAckWait * 2)
	for done := false; !done; {
		select {
		case <-deadline:
			done = true
		case <-time.After(50 * time.Millisecond):
			if n := requests.Load(); n != 1 {
				t.Fatalf("%d requests to the model after the stop, want the 1 cut one", n)
			}
		}
	}
	if rec, _, _ := s.Worker.Deps.Runs.Get(context.Background(), runID); rec.Attempts != 1 || rec.Status != runs.Aborted {
		t.Fatalf("run record past the ack wait: %+v", rec)
	}

	// nothing runs now: a second stop answers the same and changes nothing
	_, rev, _ := s.Worker.Deps.Store.Get(context.Background(), turnsTarget)
	reply, err = bus.SessionOp(bustest.Context(t), s.Conn, s.Worker.Deps.Names, "stop", ops, body)
	if err != nil || !strings.Contains(string(reply), `"status":"idle"`) {
		t.Fatalf("second stop: %s %v", reply, err)
	}
	if _, rev2, _ := s.Worker.Deps.Store.Get(context.Background(), turnsTarget); rev2 != rev {
		t.Fatal("a stop with nothing running wrote the session entry")
	}
	// the next turn runs, and clears abortedLastRun as OpenClaw's does
	if got := sendTo(t, s, turnsTarget, "shorter please"); !strings.HasPrefix(got, "reply ") {
		t.Fatalf("next turn: %q", got)
	}
	if e, _, _ := s.Worker.Deps.Store.Get(context.Background(), turnsTarget); e.AbortedLastRun {
		t.Fatal("abortedLastRun kept after the next turn")
	}
}

// runPart is the run's transcript entry of part, decoded (nil: none).
func runPart(t *testing.T, s *handlerstest.Stack, key, runID, part string) map[string]any {
	t.Helper()
	es, _, err := s.Worker.Deps.Transcripts.Tail(bustest.Context(t), bus.EncodeKey(key), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		var m map[string]any
		if json.Unmarshal(e.Data, &m) != nil {
			continue
		}
		if mk, _ := m["__sessionbus"].(map[string]any); mk != nil && mk["run"] == runID && mk["part"] == part {
			return m
		}
	}
	return nil
}
