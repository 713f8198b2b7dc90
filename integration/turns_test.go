package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// modelStub is a recording OpenAI-compatible chat-completions endpoint:
// it answers a compaction request (its system prompt asks for a summary)
// with summary (and no usage), the agent-to-agent announce step with
// ANNOUNCE_SKIP, and any other request with "reply <n>"; turns report
// usage (nil: none),
// as server-sent events when stream is set, else as one JSON body.
type modelStub struct {
	srv     *httptest.Server
	stream  bool
	mu      sync.Mutex
	reqs    [][]stubMessage
	summary string
	usage   map[string]any
	// efforts is each request's reasoning_effort ("" for none), in order
	efforts []string
	// hold, when set, is asked first: true means it answered (or dropped)
	// the request itself
	hold func(w http.ResponseWriter, r *http.Request, summary bool) bool
}

type stubMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func newModelStub(t *testing.T, stream bool) *modelStub {
	m := &modelStub{stream: stream, summary: "SUMMARY-1"}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *modelStub) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body struct {
		Messages        []stubMessage `json:"messages"`
		ReasoningEffort string        `json:"reasoning_effort"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || len(body.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, body.Messages)
	m.efforts = append(m.efforts, body.ReasoningEffort)
	n, summary, usage, hold := len(m.reqs), m.summary, m.usage, m.hold
	m.mu.Unlock()
	if hold != nil && hold(w, r, isSummaryRequest(body.Messages)) {
		return
	}
	last := body.Messages[len(body.Messages)-1].Content
	reply := fmt.Sprintf("reply %d", n)
	switch {
	case isSummaryRequest(body.Messages):
		reply, usage = summary, nil
	case strings.Contains(last, "Agent-to-agent announce step"):
		reply = "ANNOUNCE_SKIP" // a turn too: the same usage
	}
	if !m.stream {
		resp := map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": reply}, "finish_reason": "stop"}}}
		if usage != nil {
			resp["usage"] = usage
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(v any) { b, _ := json.Marshal(v); fmt.Fprintf(w, "data: %s\n\n", b) }
	chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": reply}}}})
	chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	if usage != nil {
		chunk(map[string]any{"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func isSummaryRequest(msgs []stubMessage) bool {
	return msgs[0].Role == "system" && strings.Contains(msgs[0].Content, "context summarization assistant")
}

// turns are the requests that ran a turn (not a summary, not an announce
// step), in order; summaries the compaction requests.
func (m *modelStub) split() (turns, summaries [][]stubMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.reqs {
		switch {
		case isSummaryRequest(r):
			summaries = append(summaries, r)
		case !strings.Contains(r[len(r)-1].Content, "Agent-to-agent announce step"):
			turns = append(turns, r)
		}
	}
	return turns, summaries
}

// conversation drops the system messages.
func conversation(msgs []stubMessage) []stubMessage {
	var out []stubMessage
	for _, m := range msgs {
		if m.Role != "system" {
			out = append(out, m)
		}
	}
	return out
}

const turnsTarget = "agent:oa:main"

// turnsStack is a worker and gateway with a scripted main agent and an
// openai agent oa on stub, with edit applied to the config.
func turnsStack(t *testing.T, stub *modelStub, edit func(*config.Config)) *handlerstest.Stack {
	t.Setenv("SB_TEST_OPENAI_KEY", "sk-test-turns")
	s, _ := sendStack(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Tools.AgentToAgent.Allow = []string{"*"}
		c.Session.AgentToAgent.MaxPingPongTurns = 0
		c.Agents.Defaults.Subagents.AllowAgents = []string{"*"}
		c.Agents.List = []config.Agent{
			scriptAgent("main", map[string]any{"reply": "REPLY_SKIP"}),
			{ID: "oa", Runtime: "openai", OpenAI: map[string]any{
				"baseURL": stub.srv.URL + "/v1", "model": "stub", "apiKeyEnv": "SB_TEST_OPENAI_KEY",
			}},
		}
		if edit != nil {
			edit(c)
		}
	})
	return s
}

// seedLines imports n alternating user/assistant entries of about size
// characters each into key.
func seedLines(s *handlerstest.Stack, key string, n, size int) []string {
	var lines, texts []string
	for i := range n {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		text := fmt.Sprintf("m%02d ", i) + strings.Repeat("x", max(size-4, 0))
		texts = append(texts, text)
		lines = append(lines, `{"type":"message","message":{"role":"`+role+`","content":[{"type":"text","text":`+mustJSON(text)+`}]}}`)
	}
	s.Import(importer.ImportOptions{SessionKey: key, AgentID: "oa"}, lines...)
	return texts
}

func sendTo(t *testing.T, s *handlerstest.Stack, key, msg string) string {
	t.Helper()
	res := s.MustCall(mainKey, "sessions_send", `{"sessionKey":"`+key+`","message":`+mustJSON(msg)+`,"timeoutSeconds":60}`)
	reply, _ := res["reply"].(string)
	if res["status"] != "ok" {
		t.Fatalf("send to %s: %v", key, res)
	}
	return reply
}

// TestTurnContextIsTheWholeSession: a 60-entry session reaches the model
// whole, in order, followed by the prompt, streamed or not.
func TestTurnContextIsTheWholeSession(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			stub := newModelStub(t, stream)
			s := turnsStack(t, stub, nil)
			texts := seedLines(s, turnsTarget, 60, 40)
			if reply := sendTo(t, s, turnsTarget, "what came first?"); reply != "reply 1" {
				t.Fatalf("reply %q", reply)
			}
			turns, summaries := stub.split()
			if len(turns) != 1 || len(summaries) != 0 {
				t.Fatalf("%d turn requests, %d summaries; want 1 and 0", len(turns), len(summaries))
			}
			got := conversation(turns[0])
			if len(got) != 61 {
				t.Fatalf("the model got %d messages, want the 60 entries and the prompt", len(got))
			}
			for i, text := range texts {
				if got[i].Content != text {
					t.Fatalf("message %d is %q, want %q", i, got[i].Content, text)
				}
			}
			if !strings.Contains(got[60].Content, "what came first?") {
				t.Fatalf("last message %q is not the prompt", got[60].Content)
			}
		})
	}
}

// TestCompactionOnceWhenTheWindowIsSmall: a session longer than a small
// configured window is compacted once before the turn; the turn's
// request and the next turn's start with the summary, compactionCount is
// 1, changesSince returns one compacted event, sessions_history shows
// every entry with the compaction marker, and the next turn (its context
// now measured by the provider's usage) does not compact again.
func TestCompactionOnceWhenTheWindowIsSmall(t *testing.T) {
	stub := newModelStub(t, true)
	stub.usage = map[string]any{"prompt_tokens": 500, "completion_tokens": 20}
	s := turnsStack(t, stub, func(c *config.Config) {
		c.Models.Providers = map[string]config.ModelProvider{"openai": {Models: []config.CatalogModel{{ID: "stub", ContextWindow: 2000}}}}
		c.Agents.Defaults.Compaction = config.Compaction{ReserveTokens: 400, KeepRecentTokens: 300}
	})
	texts := seedLines(s, turnsTarget, 60, 120)
	sendTo(t, s, turnsTarget, "first question")
	_, first := stub.split()
	sendTo(t, s, turnsTarget, "second question")
	turns, summaries := stub.split()
	// the entries to summarize may take more than one call at this
	// window (each merging into the summary so far): all before turn 1
	if len(first) == 0 || len(summaries) != len(first) || len(turns) != 2 {
		t.Fatalf("%d summary calls by turn 1, %d by turn 2, %d turns; want some, no more, 2", len(first), len(summaries), len(turns))
	}
	if sc := summaries[0][1].Content; !strings.Contains(sc, "[User]: "+texts[0]) || !strings.Contains(sc, "## Critical Context") {
		t.Fatalf("the summary request lacks the first entry or the format:\n%.300s", sc)
	}
	for i, req := range turns {
		conv := conversation(req)
		if !strings.HasPrefix(conv[0].Content, runtime.CompactionSummaryPrefix) || !strings.Contains(conv[0].Content, "SUMMARY-1") {
			t.Fatalf("turn %d does not start with the summary: %q", i, conv[0].Content)
		}
		if len(conv) >= 62 {
			t.Fatalf("turn %d got %d messages: nothing was cut", i, len(conv))
		}
	}
	e := waitCounters(t, s, turnsTarget)
	bustest.WaitFor(t, 10*time.Second, "compactionCount on the entry", func() bool {
		e = sessionEntry(t, s, turnsTarget)
		return e.Rares().CompactionCount > 0
	})
	if n := e.Rares().CompactionCount; n != 1 {
		t.Fatalf("compactionCount %d, want 1", n)
	}
	st := s.MustCall(turnsTarget, "session_status", `{"changesSince":0}`)
	changes, _ := json.Marshal(st)
	if c := strings.Count(string(changes), `"kind":"compacted"`); c != 1 {
		t.Fatalf("changesSince has %d compacted events, want 1: %s", c, changes)
	}
	if !strings.Contains(st["statusText"].(string), "🧹 Compactions: 1") {
		t.Fatalf("card: %s", st["statusText"])
	}
	hist := s.MustCall(mainKey, "sessions_history", `{"sessionKey":"`+turnsTarget+`","limit":200}`)
	msgs, _ := hist["messages"].([]any)
	raw, _ := json.Marshal(msgs)
	if len(msgs) < 60+4+1 || strings.Count(string(raw), `"kind":"compaction"`) != 1 || strings.Contains(string(raw), "SUMMARY-1") || !strings.Contains(string(raw), texts[0]) {
		t.Fatalf("history: %d messages (want the 60 seeded, 2 turns, one marker without the summary): %.400s", len(msgs), raw)
	}
}

// waitCounters waits until a turn's counters are on key's entry: the
// gateway writes the entry beside the run's outcome, which a send's
// answer waits for.
func waitCounters(t *testing.T, s *handlerstest.Stack, key string) *sessions.Entry {
	t.Helper()
	var e *sessions.Entry
	bustest.WaitFor(t, 10*time.Second, "the turn's counters on the entry", func() bool {
		e = sessionEntry(t, s, key)
		return e.ContextTokens > 0
	})
	return e
}

func sessionEntry(t *testing.T, s *handlerstest.Stack, key string) *sessions.Entry {
	t.Helper()
	e, _, err := s.Worker.Deps.Store.Get(bustest.Context(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestLiveUsageEverywhere: the stub's usage appears exactly on the reply
// entry, the session entry, the status card (priced from the catalog),
// the sessions_list row and a child's completion announce stats line.
func TestLiveUsageEverywhere(t *testing.T) {
	stub := newModelStub(t, true)
	stub.usage = map[string]any{"prompt_tokens": 1500, "completion_tokens": 56, "prompt_tokens_details": map[string]any{"cached_tokens": 300}}
	s := turnsStack(t, stub, func(c *config.Config) {
		c.Models.Providers = map[string]config.ModelProvider{"openai": {Models: []config.CatalogModel{{
			ID: "stub", ContextWindow: 32000, Cost: config.ModelCost{Input: 2, Output: 8, CacheRead: 0.5},
		}}}}
	})
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: turnsTarget, AgentID: "oa", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	sendTo(t, s, turnsTarget, "hello")
	// the session entry is written beside the outcome (the send's answer)
	e := waitCounters(t, s, turnsTarget)
	if e.InputTokens != 1200 || e.OutputTokens != 56 || e.TotalTokens != 1500 || e.ContextTokens != 32000 || e.Rares().CacheRead != 300 {
		t.Fatalf("entry counters in %d out %d total %d context %d cacheRead %d", e.InputTokens, e.OutputTokens, e.TotalTokens, e.ContextTokens, e.Rares().CacheRead)
	}
	card := s.MustCall(turnsTarget, "session_status", `{}`)["statusText"].(string)
	for _, want := range []string{"🧮 Tokens: 1.2k in / 56 out · 💵 Cost: $0.0030", "📚 Context: 1.5k/32k (4%) · 🧹 Compactions: 0"} {
		if !strings.Contains(card, want) {
			t.Fatalf("card lacks %q:\n%s", want, card)
		}
	}
	var row map[string]any
	// the list reads the worker's index, which follows the store
	bustest.WaitFor(t, 10*time.Second, "the list row's counters", func() bool {
		row = findRow(s.MustCall(mainKey, "sessions_list", `{}`), turnsTarget)
		return row != nil && row["contextTokens"] != nil
	})
	if row["totalTokens"] != float64(1500) || row["contextTokens"] != float64(32000) {
		t.Fatalf("list row %v", row)
	}
	var reply struct {
		Content string         `json:"content"`
		Usage   map[string]any `json:"usage"`
	}
	entries, _, err := s.Worker.Deps.Transcripts.Tail(bustest.Context(t), bus.EncodeKey(turnsTarget), 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if json.Unmarshal(e.Data, &reply) == nil && reply.Content == "reply 1" {
			break
		}
	}
	if u := reply.Usage; u["input"] != float64(1200) || u["output"] != float64(56) || u["cacheRead"] != float64(300) || u["totalTokens"] != float64(1556) || u["cost"] == nil {
		t.Fatalf("reply usage %v", u)
	}

	// a child on the same model: its announce's stats line has its usage
	spawn := s.MustCall(mainKey, "sessions_spawn", `{"task":"count to three","agentId":"oa"}`)
	child, _ := spawn["childSessionKey"].(string)
	if child == "" {
		t.Fatalf("spawn: %v", spawn)
	}
	bustest.WaitFor(t, 60*time.Second, "the child's announce in the requester", func() bool {
		es, _, err := s.Worker.Deps.Transcripts.Tail(bustest.Context(t), bus.EncodeKey(mainKey), 20, 0)
		if err != nil {
			return false
		}
		for _, e := range es {
			if strings.Contains(string(e.Data), child) && strings.Contains(string(e.Data), "Stats: runtime") {
				if !strings.Contains(string(e.Data), "tokens 1.3k (in 1.2k / out 56) • prompt/cache 1.5k") {
					t.Fatalf("announce stats: %s", e.Data)
				}
				return true
			}
		}
		return false
	})
}

func findRow(list map[string]any, key string) map[string]any {
	rows, _ := list["sessions"].([]any)
	for _, r := range rows {
		if m, ok := r.(map[string]any); ok && m["key"] == key {
			return m
		}
	}
	return nil
}

// compactOp asks for an on-demand compaction as `sessionbus session
// compact` does.
func compactOp(t *testing.T, s *handlerstest.Stack, key string) (map[string]any, error) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"sessionKey": key, "instructions": "Focus on decisions"})
	data, err := bus.SessionOp(bustest.Context(t), s.Conn, s.Worker.Deps.Names, "compact", s.Token(bus.Caller{Adapter: bus.AnyChannel}), body)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out, nil
}

func countCompactions(t *testing.T, s *handlerstest.Stack, key string) int {
	t.Helper()
	es, _, err := s.Worker.Deps.Transcripts.Tail(bustest.Context(t), bus.EncodeKey(key), 500, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if strings.Contains(string(e.Data), `"type":"compaction"`) {
			n++
		}
	}
	return n
}

// TestCompactOnDemand: the compact op compacts a session that fits, with
// the operator's focus in the summary request; a session that does not
// exist, an agent that cannot summarize and an empty summary are refused
// with a reason and leave the transcript as it was.
func TestCompactOnDemand(t *testing.T) {
	stub := newModelStub(t, false)
	s := turnsStack(t, stub, func(c *config.Config) {
		c.Agents.Defaults.Compaction = config.Compaction{KeepRecentTokens: 50}
		c.Agents.List = append(c.Agents.List, scriptAgent("plain"))
	})
	seedLines(s, turnsTarget, 20, 80)
	res, err := compactOp(t, s, turnsTarget)
	if err != nil || res["status"] != "ok" || res["compactionCount"] != float64(1) {
		t.Fatalf("compact: %v, %v", res, err)
	}
	_, summaries := stub.split()
	if len(summaries) != 1 || !strings.Contains(summaries[0][1].Content, "Additional focus: Focus on decisions") {
		t.Fatalf("%d summary requests, focus missing", len(summaries))
	}
	st, _ := json.Marshal(s.MustCall(turnsTarget, "session_status", `{"changesSince":0}`))
	if strings.Count(string(st), `"kind":"compacted"`) != 1 || !strings.Contains(string(st), "🧹 Compactions: 1") {
		t.Fatalf("changes: %s", st)
	}

	if _, err := compactOp(t, s, "agent:oa:nosuch"); err == nil || !strings.Contains(err.Error(), "no session agent:oa:nosuch") {
		t.Fatalf("unknown session: %v", err)
	}
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: "agent:plain:main", AgentID: "plain", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	if res, err := compactOp(t, s, "agent:plain:main"); err != nil || res["status"] != "error" || !strings.Contains(res["error"].(string), "cannot compact") {
		t.Fatalf("script agent without summary: %v, %v", res, err)
	}

	stub.mu.Lock()
	stub.summary = ""
	stub.mu.Unlock()
	sendTo(t, s, turnsTarget, "more")
	before := countCompactions(t, s, turnsTarget)
	res, err = compactOp(t, s, turnsTarget)
	if err != nil || res["status"] != "error" || !strings.Contains(res["error"].(string), "empty") || res["compactionCount"] != float64(1) {
		t.Fatalf("empty summary: %v, %v", res, err)
	}
	if after := countCompactions(t, s, turnsTarget); after != before {
		t.Fatalf("an empty summary left %d compaction entries, was %d", after, before)
	}
}

// TestCompactionThenGatewayStopsRunsTheTurnOnce: a gateway that compacted
// a session and stopped before its turn's request was answered leaves the
// whole compaction entry; the gateway that takes the redelivered run finds
// it (no second summary), runs the turn once and writes one reply.
func TestCompactionThenGatewayStopsRunsTheTurnOnce(t *testing.T) {
	stub := newModelStub(t, true)
	stub.usage = map[string]any{"prompt_tokens": 300, "completion_tokens": 5}
	blocked := make(chan struct{})
	var once sync.Once
	stub.hold = func(w http.ResponseWriter, r *http.Request, summary bool) bool {
		first := false
		if !summary {
			once.Do(func() { first = true })
		}
		if first {
			close(blocked)
			<-r.Context().Done() // the first turn request never gets an answer
		}
		return first
	}
	t.Setenv("SB_TEST_OPENAI_KEY", "sk-test-turns")
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Session.AgentToAgent.MaxPingPongTurns = 0
		c.Models.Providers = map[string]config.ModelProvider{"openai": {Models: []config.CatalogModel{{ID: "stub", ContextWindow: 2000}}}}
		c.Agents.Defaults.Compaction = config.Compaction{ReserveTokens: 400, KeepRecentTokens: 300}
		c.Agents.List = []config.Agent{
			scriptAgent("main", map[string]any{"reply": "REPLY_SKIP"}),
			{ID: "oa", Runtime: "openai", OpenAI: map[string]any{"baseURL": stub.srv.URL + "/v1", "model": "stub", "apiKeyEnv": "SB_TEST_OPENAI_KEY"}},
		}
	})
	g1 := gatewaytest.Start(t, s, s.Conn, "gw-1", nil, gateway.Options{AckWait: 2 * time.Second})
	seedLines(s, turnsTarget, 60, 120)
	replied := make(chan string, 1)
	go func() {
		res, err := s.Call(mainKey, "sessions_send", `{"sessionKey":"`+turnsTarget+`","message":"the question","timeoutSeconds":90}`)
		reply, _ := res["reply"].(string)
		if err != nil {
			reply = err.Error()
		}
		replied <- reply
	}()
	select {
	case <-blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("the turn's request never came")
	}
	_, summaries := stub.split()
	g1.Stop()
	if n := countCompactions(t, s, turnsTarget); n != 1 {
		t.Fatalf("%d compaction entries after the stop, want the one whole entry", n)
	}
	gatewaytest.Start(t, s, s.Conn, "gw-2", nil, gateway.Options{AckWait: 2 * time.Second})
	var reply string
	select {
	case reply = <-replied:
	case <-time.After(90 * time.Second):
		t.Fatal("the redelivered run never finished")
	}
	if !strings.HasPrefix(reply, "reply ") {
		t.Fatalf("reply %q", reply)
	}
	if _, after := stub.split(); len(after) != len(summaries) {
		t.Fatalf("%d summary requests after the redelivery, %d before: compacted again", len(after), len(summaries))
	}
	if n := countCompactions(t, s, turnsTarget); n != 1 {
		t.Fatalf("%d compaction entries, want 1", n)
	}
	es, _, _ := s.Worker.Deps.Transcripts.Tail(bustest.Context(t), bus.EncodeKey(turnsTarget), 50, 0)
	replies := 0
	for _, e := range es {
		if strings.Contains(string(e.Data), `"part":"reply"`) && strings.Contains(string(e.Data), `"content":"reply `) {
			replies++
		}
	}
	if replies != 1 {
		t.Fatalf("%d replies in the transcript, want 1", replies)
	}
	bustest.WaitFor(t, 10*time.Second, "compactionCount 1", func() bool {
		return sessionEntry(t, s, turnsTarget).Rares().CompactionCount == 1
	})
}

// TestTurnUsageFallbacks: a model the catalog does not list gets the
// default window; a provider that reports no usage leaves no usage on the
// reply entry and the gateway's estimate on the session entry.
func TestTurnUsageFallbacks(t *testing.T) {
	stub := newModelStub(t, true) // usage nil: reports none
	s := turnsStack(t, stub, nil)
	seedLines(s, turnsTarget, 4, 400)
	sendTo(t, s, turnsTarget, "hello")
	e := waitCounters(t, s, turnsTarget)
	if e.ContextTokens != config.DefaultContextWindow || e.TotalTokens < 400 || e.InputTokens != e.TotalTokens {
		t.Fatalf("entry: context %d total %d input %d", e.ContextTokens, e.TotalTokens, e.InputTokens)
	}
	es, _, _ := s.Worker.Deps.Transcripts.Tail(bustest.Context(t), bus.EncodeKey(turnsTarget), 10, 0)
	for _, en := range es {
		if strings.Contains(string(en.Data), `"part":"reply"`) && strings.Contains(string(en.Data), `"usage"`) {
			t.Fatalf("an estimate was recorded as usage: %s", en.Data)
		}
	}
}

// TestEmptyAutoCompactionSummary: when the model's summary comes back
// empty, nothing is appended, and the turn runs once with the newest
// entries that fit its window.
func TestEmptyAutoCompactionSummary(t *testing.T) {
	stub := newModelStub(t, false)
	stub.summary = ""
	s := turnsStack(t, stub, func(c *config.Config) {
		c.Models.Providers = map[string]config.ModelProvider{"openai": {Models: []config.CatalogModel{{ID: "stub", ContextWindow: 2000}}}}
		c.Agents.Defaults.Compaction = config.Compaction{ReserveTokens: 400, KeepRecentTokens: 300}
	})
	texts := seedLines(s, turnsTarget, 60, 120)
	if reply := sendTo(t, s, turnsTarget, "the question"); !strings.HasPrefix(reply, "reply ") {
		t.Fatalf("reply %q", reply)
	}
	turns, summaries := stub.split()
	if len(summaries) == 0 || len(turns) != 1 {
		t.Fatalf("%d summaries, %d turns", len(summaries), len(turns))
	}
	conv := conversation(turns[0])
	if len(conv) >= 61 || len(conv) < 2 || conv[len(conv)-2].Content != texts[59] || !strings.Contains(conv[len(conv)-1].Content, "the question") {
		t.Fatalf("the turn got %d messages, want the newest that fit, ending with the prompt", len(conv))
	}
	if n := countCompactions(t, s, turnsTarget); n != 0 {
		t.Fatalf("%d compaction entries after an empty summary", n)
	}
}
