package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// queueKey is the session of the queue tests: agent oa on the openai
// runtime against a stub model, talking on telegram.
const queueKey = "agent:oa:telegram:dm:42"

// stubMsg is one message of a request to the stub model.
type stubMsg struct {
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

func (m stubMsg) text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// queueModel is an OpenAI-compatible endpoint the test scripts: respond
// answers the n-th request (1-based) with its messages; requests reports
// each request's number as it arrives.
type queueModel struct {
	srv      *httptest.Server
	mu       sync.Mutex
	reqs     [][]stubMsg
	requests chan int
	respond  func(n int, msgs []stubMsg, w http.ResponseWriter, r *http.Request)
}

func newQueueModel(t *testing.T, respond func(n int, msgs []stubMsg, w http.ResponseWriter, r *http.Request)) *queueModel {
	m := &queueModel{requests: make(chan int, 100), respond: respond}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Messages []stubMsg `json:"messages"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.reqs = append(m.reqs, body.Messages)
		n := len(m.reqs)
		m.mu.Unlock()
		m.requests <- n
		m.respond(n, body.Messages, w, r)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *queueModel) request(n int) []stubMsg {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[n-1]
}

func (m *queueModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// awaitRequest waits for the model's n-th request.
func (m *queueModel) awaitRequest(t *testing.T, n int) {
	t.Helper()
	bustest.WaitFor(t, 30*time.Second, fmt.Sprintf("the model's request %d", n), func() bool { return m.count() >= n })
}

// sse writes server-sent chunks, flushing each: a slow stream.
func sse(w http.ResponseWriter, chunks ...any) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
}

func textDelta(s string) any {
	return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}}}}
}

func streamText(w http.ResponseWriter, s string) {
	sse(w, textDelta(s), map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// streamToolCalls ends a stream asking for n sessions_list calls.
func streamToolCalls(w http.ResponseWriter, n int) {
	var calls []any
	for i := range n {
		calls = append(calls, map[string]any{"index": i, "id": fmt.Sprintf("call_%d", i+1), "type": "function",
			"function": map[string]any{"name": "sessions_list", "arguments": `{"limit":1}`}})
	}
	sse(w, map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": calls}}}},
		map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "tool_calls"}}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// queueStack is a server with two workers and two gateways (gw-a, gw-b,
// each on its own connection), agents oa (openai, against model) and sc
// (script, slow), and the session queueKey on telegram.
type queueStack struct {
	*handlerstest.Stack
	other *handlers.Worker // the second worker
	gws   map[string]*gateway.Gateway
	stop  map[string]func()
}

func startQueueStack(t *testing.T, model *queueModel) *queueStack {
	t.Helper()
	t.Setenv("SB_TEST_QUEUE_KEY", "sk-test-queue")
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{
			{ID: "oa", Runtime: "openai", OpenAI: map[string]any{
				"baseURL": model.srv.URL + "/v1", "model": "stub", "apiKeyEnv": "SB_TEST_QUEUE_KEY",
			}},
			{ID: "sc", Runtime: "script", Script: map[string]any{"rules": []any{
				map[string]any{"match": "^slow", "delayMs": 1500, "reply": "slow done"},
				map[string]any{"reply": "sc: {{message}}"},
			}}},
		}
		c.Quotas.ToolCallsPerSession.Rate = 0
	})
	qs := &queueStack{Stack: s, gws: map[string]*gateway.Gateway{}, stop: map[string]func(){}}
	nc, _ := bustest.Connect(t, s.Server)
	w, err := handlers.StartWorker(bustest.Context(t), nc, s.Config, bus.NewVerifier(s.Operator.PublicKey()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	qs.other = w
	for _, id := range []string{"gw-a", "gw-b"} {
		gnc, _ := bustest.Connect(t, s.Server)
		g, err := gateway.StartWithOptions(bustest.Context(t), gnc, s.Config, s.Operator, id, nil, gateway.Options{AckWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stop := sync.OnceFunc(g.Stop)
		t.Cleanup(stop)
		qs.gws[id], qs.stop[id] = g, stop
	}
	now := time.Now().UnixMilli()
	for _, k := range []string{queueKey, "agent:sc:telegram:dm:42"} {
		s.Put(&sessions.Entry{Key: k, AgentID: strings.Split(k, ":")[1], SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now,
			LastChannel: "telegram", DeliveryContext: &sessions.DeliveryContext{Channel: "telegram", To: "42"}})
	}
	return qs
}

// send is a human message on telegram into key (a refusal: *bus.Error).
func (qs *queueStack) send(key, text string) (map[string]any, error) {
	qs.T.Helper()
	return inboundRaw(qs.T.(*testing.T), qs.Stack, qs.Token(bus.Caller{Adapter: "telegram"}),
		map[string]any{"sessionKey": key, "channel": "telegram", "from": "42", "text": text})
}

func (qs *queueStack) mustSend(key, text string) map[string]any {
	qs.T.Helper()
	out, err := qs.send(key, text)
	if err != nil {
		qs.T.Fatalf("send %q: %v", text, err)
	}
	return out
}

func (qs *queueStack) wait(runID string) *runs.Record {
	qs.T.Helper()
	return runstest.WaitRun(qs.T, qs.Worker.Deps.Runs, runID, 30*time.Second)
}

// users is the text of every user message of msgs.
func users(msgs []stubMsg) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == "user" {
			out = append(out, m.text())
		}
	}
	return out
}

// TestSteerGoesIntoTheRunningTurnOnce: a message that comes while the
// model is working on a turn (default mode steer) is answered "steered"
// with the running run's id; the tool calls the model then asks for are
// not run but answered OpenClaw's skip text, and the model's next request
// holds the tool results and then the message, once. No other turn runs,
// and the transcript keeps the message between the prompt and the reply.
func TestSteerGoesIntoTheRunningTurnOnce(t *testing.T) {
	release := make(chan struct{})
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sse(w, textDelta("working on it"))
			<-release
			streamToolCalls(w, 2)
			return
		}
		streamText(w, "final answer")
	})
	qs := startQueueStack(t, model)
	first := qs.mustSend(queueKey, "write the report")
	runID, _ := first["runId"].(string)
	model.awaitRequest(t, 1)
	out := qs.mustSend(queueKey, "only the summary please")
	if out["status"] != "steered" || out["runId"] != runID {
		t.Fatalf("steer: %v (running run %s)", out, runID)
	}
	close(release)
	if rec := qs.wait(runID); rec.Status != runs.OK || rec.Reply != "final answer" {
		t.Fatalf("run record %+v", rec)
	}
	if n := model.count(); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
	second := model.request(2)
	var roles []string
	for _, m := range second {
		roles = append(roles, m.Role)
	}
	if fmt.Sprint(roles) != "[user assistant tool tool user]" {
		t.Fatalf("second request's roles %v", roles)
	}
	if second[2].text() != config.SkippedToolText || second[3].text() != config.SkippedToolText {
		t.Fatalf("skipped calls answered %q and %q", second[2].text(), second[3].text())
	}
	if got := users(second); fmt.Sprint(got) != "[write the report only the summary please]" {
		t.Fatalf("second request's user messages %q", got)
	}
	var contents []string
	for _, e := range transcriptOf(t, qs.Stack, queueKey) {
		contents = append(contents, fmt.Sprint(e["content"]))
	}
	if fmt.Sprint(contents) != "[write the report only the summary please final answer]" {
		t.Fatalf("transcript %q", contents)
	}
}

// TestSteerCommand: /steer (and /tell) put a message into the running
// turn whatever the queue mode and answer OpenClaw's text (a turn that
// ends before its next boundary leaves it a turn of its own); with no turn
// running the message runs as a normal prompt; bare, it is answered the
// usage.
func TestSteerCommand(t *testing.T) {
	release := make(chan struct{})
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sse(w, textDelta("thinking"))
			<-release
		}
		streamText(w, fmt.Sprintf("answer %d", n))
	})
	qs := startQueueStack(t, model)
	if out := qs.mustSend(queueKey, "/queue followup"); out["reply"] != config.QueueModeSetText("followup") {
		t.Fatalf("/queue followup: %v", out)
	}
	if out := qs.mustSend(queueKey, "/steer"); out["reply"] != config.SteerUsage {
		t.Fatalf("bare /steer: %v", out)
	}
	first := qs.mustSend(queueKey, "start")
	runID, _ := first["runId"].(string)
	model.awaitRequest(t, 1)
	if out := qs.mustSend(queueKey, "/tell  be brief"); out["reply"] != config.SteeredText || out["runId"] != runID {
		t.Fatalf("/tell: %v", out)
	}
	close(release)
	if rec := qs.wait(runID); rec.Status != runs.OK {
		t.Fatalf("run %+v", rec)
	}
	// the model asked for no tool: the turn ended with its answer, and the
	// message it took too late runs as a turn of its own, next
	model.awaitRequest(t, 2)
	if got := users(model.request(2)); got[len(got)-1] != "be brief" {
		t.Fatalf("the late steer's own turn: %q", got)
	}
	bustest.WaitFor(t, 30*time.Second, "the late steer's turn to end", func() bool {
		return len(transcriptOf(t, qs.Stack, queueKey)) == 4 // start, answer 1, be brief, answer 2
	})
	out := qs.mustSend(queueKey, "/steer now idle")
	idle, _ := out["runId"].(string)
	if out["status"] != "accepted" || idle == "" {
		t.Fatalf("/steer with nothing running: %v", out)
	}
	if rec := qs.wait(idle); rec.Status != runs.OK {
		t.Fatalf("idle /steer's run %+v", rec)
	}
	if got := users(model.request(model.count())); got[len(got)-1] != "now idle" {
		t.Fatalf("idle /steer's prompt %q", got)
	}
}

// TestSteerSurvivesAGatewayThatDies: the gateway running the turn goes
// away after a message was steered in and before the turn's next
// boundary; the other gateway runs the turn again, and its first model
// request holds the prompt and the message, once each.
func TestSteerSurvivesAGatewayThatDies(t *testing.T) {
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sse(w, textDelta("partial"))
			<-r.Context().Done() // until its gateway goes
			return
		}
		streamText(w, "redone")
	})
	qs := startQueueStack(t, model)
	first := qs.mustSend(queueKey, "long task")
	runID, _ := first["runId"].(string)
	model.awaitRequest(t, 1)
	if out := qs.mustSend(queueKey, "also check the logs"); out["status"] != "steered" {
		t.Fatalf("steer: %v", out)
	}
	rec, _, err := qs.Worker.Deps.Runs.Get(context.Background(), runID)
	if err != nil || qs.stop[rec.Gateway] == nil {
		t.Fatalf("running record %+v %v", rec, err)
	}
	qs.stop[rec.Gateway]()
	done := qs.wait(runID)
	if done.Status != runs.OK || done.Attempts != 2 || done.Reply != "redone" {
		t.Fatalf("run record %+v", done)
	}
	if n := model.count(); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
	if got := users(model.request(2)); fmt.Sprint(got) != "[long task also check the logs]" {
		t.Fatalf("the redelivered run's request: user messages %q", got)
	}
	steers := 0
	for _, e := range transcriptOf(t, qs.Stack, queueKey) {
		if e["content"] == "also check the logs" {
			steers++
		}
	}
	if steers != 1 {
		t.Fatalf("the steered message is %d times in the transcript", steers)
	}
}

// TestCollectGathersOneTurn: in collect mode three messages that come
// while a turn runs, within the quiet window, become one turn after it,
// its prompt OpenClaw's batch.
func TestCollectGathersOneTurn(t *testing.T) {
	release := make(chan struct{})
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sse(w, textDelta("busy"))
			<-release
		}
		streamText(w, fmt.Sprintf("answer %d", n))
	})
	qs := startQueueStack(t, model)
	if out := qs.mustSend(queueKey, "/queue collect debounce:300ms"); out["reply"] != config.QueueModeSetText("collect")+" "+config.QueueDebounceSetText(300) {
		t.Fatalf("/queue collect: %v", out)
	}
	first := qs.mustSend(queueKey, "first")
	model.awaitRequest(t, 1)
	var batch string
	for _, text := range []string{"one", "two", "three"} {
		out := qs.mustSend(queueKey, text)
		id, _ := out["runId"].(string)
		if out["status"] != "collected" || (batch != "" && id != batch) {
			t.Fatalf("%s: %v (batch %s)", text, out, batch)
		}
		batch = id
	}
	close(release)
	if rec := qs.wait(first["runId"].(string)); rec.Status != runs.OK {
		t.Fatalf("first run %+v", rec)
	}
	if rec := qs.wait(batch); rec.Status != runs.OK || rec.Reply != "answer 2" {
		t.Fatalf("collect run %+v", rec)
	}
	if n := model.count(); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
	want := config.CollectHeader + "\n\n---\nQueued #1\none\n\n---\nQueued #2\ntwo\n\n---\nQueued #3\nthree"
	if got := users(model.request(2)); got[len(got)-1] != want {
		t.Fatalf("collect prompt %q", got[len(got)-1])
	}
}

// TestFollowupRunsThreeTurnsInOrder: in followup mode three messages sent
// while a turn runs are three turns after it, in the order they came,
// across two gateways.
func TestFollowupRunsThreeTurnsInOrder(t *testing.T) {
	release := make(chan struct{})
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sse(w, textDelta("busy"))
			<-release
		}
		streamText(w, fmt.Sprintf("answer %d", n))
	})
	qs := startQueueStack(t, model)
	qs.mustSend(queueKey, "/queue followup")
	first := qs.mustSend(queueKey, "first")
	model.awaitRequest(t, 1)
	var ids []string
	for _, text := range []string{"one", "two", "three"} {
		out := qs.mustSend(queueKey, text)
		if out["status"] != "accepted" {
			t.Fatalf("%s: %v", text, out)
		}
		ids = append(ids, out["runId"].(string))
	}
	close(release)
	qs.wait(first["runId"].(string))
	for _, id := range ids {
		if rec := qs.wait(id); rec.Status != runs.OK {
			t.Fatalf("run %+v", rec)
		}
	}
	var last []string
	for n := 2; n <= model.count(); n++ {
		u := users(model.request(n))
		last = append(last, u[len(u)-1])
	}
	if fmt.Sprint(last) != "[one two three]" {
		t.Fatalf("turns ran %q, want one, two, three", last)
	}
}

// TestInterruptStopsTheTurnAndRunsTheNewest: in interrupt mode a message
// stops the running turn (its record ends aborted) and runs next.
func TestInterruptStopsTheTurnAndRunsTheNewest(t *testing.T) {
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sse(w, textDelta("old work"))
			<-r.Context().Done()
			return
		}
		streamText(w, "new answer")
	})
	qs := startQueueStack(t, model)
	qs.mustSend(queueKey, "/queue interrupt")
	first := qs.mustSend(queueKey, "old task")
	model.awaitRequest(t, 1)
	out := qs.mustSend(queueKey, "new task")
	if out["status"] != "accepted" {
		t.Fatalf("interrupting message: %v", out)
	}
	if rec := qs.wait(first["runId"].(string)); rec.Status != runs.Aborted {
		t.Fatalf("interrupted run %+v", rec)
	}
	if rec := qs.wait(out["runId"].(string)); rec.Status != runs.OK || rec.Reply != "new answer" {
		t.Fatalf("newest run %+v", rec)
	}
	if got := users(model.request(2)); got[len(got)-1] != "new task" {
		t.Fatalf("newest turn's prompt %q", got)
	}
}

// TestSteerFallsBackForATurnThatCannotBeSteered: a script agent's running
// turn takes no steered message: it waits as a turn of its own.
func TestSteerFallsBackForATurnThatCannotBeSteered(t *testing.T) {
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) { streamText(w, "unused") })
	qs := startQueueStack(t, model)
	const key = "agent:sc:telegram:dm:42"
	first := qs.mustSend(key, "slow one")
	bustest.WaitFor(t, 30*time.Second, "the slow turn running", func() bool {
		rec, _, err := qs.Worker.Deps.Runs.Get(context.Background(), first["runId"].(string))
		return err == nil && rec.Status == runs.Running
	})
	out := qs.mustSend(key, "after it")
	if out["status"] != "accepted" || out["runId"] == first["runId"] {
		t.Fatalf("message to a script turn: %v", out)
	}
	if rec := qs.wait(out["runId"].(string)); rec.Status != runs.OK || rec.Reply != "sc: after it" {
		t.Fatalf("follow-up %+v", rec)
	}
}

// TestQueueBadInput: an unknown mode is answered OpenClaw's text in the
// chat and refused on the op, a bad option likewise, and a /steer from an
// adapter of another channel than the session's is refused: none of them
// writes anything.
func TestQueueBadInput(t *testing.T) {
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) { streamText(w, "x") })
	qs := startQueueStack(t, model)
	is := &inboundStack{Stack: qs.Stack}
	before := is.writes()
	delete(before, qs.Worker.Deps.Names.DeliverStream())
	if out := qs.mustSend(queueKey, "/queue bogus"); out["reply"] != config.UnknownQueueModeText("bogus") {
		t.Fatalf("/queue bogus: %v", out)
	}
	if out := qs.mustSend(queueKey, "/queue collect cap:zero drop:maybe"); out["reply"] != config.InvalidCapText("zero")+" "+config.InvalidDropText("maybe") {
		t.Fatalf("/queue with bad options: %v", out)
	}
	ops := qs.Token(bus.Caller{Adapter: bus.AnyChannel})
	_, err := bus.SessionOp(bustest.Context(t), qs.Conn, qs.Worker.Deps.Names, "queue", ops, []byte(`{"sessionKey":"`+queueKey+`","mode":"bogus"}`))
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeBadRequest || !strings.Contains(be.Message, config.UnknownQueueModeText("bogus")) {
		t.Fatalf("queue op with mode bogus: %v", err)
	}
	discord := qs.Token(bus.Caller{Adapter: "discord"})
	_, err = inboundRaw(t, qs.Stack, discord, map[string]any{"sessionKey": queueKey, "channel": "discord", "from": "7", "text": "/steer take over"})
	if !errors.As(err, &be) || be.Code != bus.CodeForbidden {
		t.Fatalf("/steer from another channel's adapter: %v", err)
	}
	after := is.writes()
	delete(after, qs.Worker.Deps.Names.DeliverStream())
	if !maps.Equal(before, after) {
		t.Fatalf("bad input wrote: before %v after %v", before, after)
	}
	// the op sets the mode, and the card shows it
	reply, err := bus.SessionOp(bustest.Context(t), qs.Conn, qs.Worker.Deps.Names, "queue", ops, []byte(`{"sessionKey":"`+queueKey+`","mode":"collect"}`))
	var res handlers.QueueResult
	if err != nil || json.Unmarshal(reply, &res) != nil || res.Mode != "collect" || res.Text != config.QueueModeSetText("collect") {
		t.Fatalf("queue op: %s %v", reply, err)
	}
	if out := qs.mustSend(queueKey, "/queue"); !strings.HasPrefix(fmt.Sprint(out["reply"]), "Current queue settings: mode=collect, debounce=500ms, cap=20, drop=summarize.") {
		t.Fatalf("bare /queue: %v", out)
	}
	if out := qs.mustSend(queueKey, "/queue reset"); out["reply"] != config.QueueResetText {
		t.Fatalf("/queue reset: %v", out)
	}
}

// transcriptOf is key's transcript entries, decoded.
func transcriptOf(t *testing.T, s *handlerstest.Stack, key string) []map[string]any {
	t.Helper()
	is := &inboundStack{Stack: s}
	return is.transcript(key)
}

// TestSteerBacklogAlsoRunsTheMessageLater: in steer-backlog mode the
// message goes into the running turn and, once that turn ends, runs as a
// turn of its own as well.
func TestSteerBacklogAlsoRunsTheMessageLater(t *testing.T) {
	release := make(chan struct{})
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sse(w, textDelta("working"))
			<-release
			streamToolCalls(w, 1)
			return
		}
		streamText(w, fmt.Sprintf("answer %d", n))
	})
	qs := startQueueStack(t, model)
	if out := qs.mustSend(queueKey, "/queue steer+backlog"); out["reply"] != config.QueueModeSetText("steer-backlog") {
		t.Fatalf("/queue steer+backlog: %v", out)
	}
	first := qs.mustSend(queueKey, "start")
	model.awaitRequest(t, 1)
	if out := qs.mustSend(queueKey, "mind the budget"); out["status"] != "steered" {
		t.Fatalf("steer: %v", out)
	}
	close(release)
	if rec := qs.wait(first["runId"].(string)); rec.Status != runs.OK || rec.Reply != "answer 2" {
		t.Fatalf("steered run %+v", rec)
	}
	if got := users(model.request(2)); fmt.Sprint(got) != "[start mind the budget]" {
		t.Fatalf("the steered turn's request %q", got)
	}
	model.awaitRequest(t, 3)
	if got := users(model.request(3)); got[len(got)-1] != "mind the budget" {
		t.Fatalf("the backlog turn's prompt %q", got)
	}
	bustest.WaitFor(t, 30*time.Second, "the backlog turn's reply", func() bool {
		es := transcriptOf(t, qs.Stack, queueKey)
		return len(es) == 5 && es[4]["content"] == "answer 3" // start, steer, answer 2, the backlog turn, answer 3
	})
	if n := model.count(); n != 3 {
		t.Fatalf("%d model requests, want 3", n)
	}
}

// TestQueueModeSteersOneMessagePerBoundary: OpenClaw's legacy queue mode
// steers the waiting messages one per boundary, oldest first.
func TestQueueModeSteersOneMessagePerBoundary(t *testing.T) {
	release := make(chan struct{})
	model := newQueueModel(t, func(n int, _ []stubMsg, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			sse(w, textDelta("working"))
			<-release
			streamToolCalls(w, 1)
		case 2:
			streamToolCalls(w, 1)
		default:
			streamText(w, "done")
		}
	})
	qs := startQueueStack(t, model)
	qs.mustSend(queueKey, "/queue queue")
	first := qs.mustSend(queueKey, "start")
	model.awaitRequest(t, 1)
	for _, text := range []string{"first note", "second note"} {
		if out := qs.mustSend(queueKey, text); out["status"] != "steered" {
			t.Fatalf("%s: %v", text, out)
		}
	}
	close(release)
	if rec := qs.wait(first["runId"].(string)); rec.Status != runs.OK {
		t.Fatalf("run %+v", rec)
	}
	if got := users(model.request(2)); fmt.Sprint(got) != "[start first note]" {
		t.Fatalf("second request %q", got)
	}
	if got := users(model.request(3)); fmt.Sprint(got) != "[start first note second note]" {
		t.Fatalf("third request %q", got)
	}
}
