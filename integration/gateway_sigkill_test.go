package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
)

// killStack is a worker in the test process and gateways as separate
// processes, sharing one config (an openai agent oa on stub, a scripted
// main agent), so a gateway can be SIGKILLed mid-turn.
type killStack struct {
	*handlerstest.Stack
	cfgPath, creds string
}

const killAckWait = "2s"

func newKillStack(t *testing.T, stub *modelStub, window int64) *killStack {
	t.Helper()
	edit := func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
		c.Session.AgentToAgent.MaxPingPongTurns = 0
		if window > 0 {
			c.Models.Providers = map[string]config.ModelProvider{"openai": {Models: []config.CatalogModel{{ID: "stub", ContextWindow: window}}}}
			c.Agents.Defaults.Compaction = config.Compaction{ReserveTokens: 400, KeepRecentTokens: 300}
		}
		c.Agents.List = []config.Agent{
			scriptAgent("main", map[string]any{"reply": "REPLY_SKIP"}),
			{ID: "oa", Runtime: "openai", OpenAI: map[string]any{"baseURL": stub.srv.URL + "/v1", "model": "stub"}},
		}
	}
	s := handlerstest.Start(t, edit)
	yaml := `
tools: {sessions: {visibility: all}, agentToAgent: {enabled: true}}
session: {agentToAgent: {maxPingPongTurns: 0}}
agents:
  list:
    - id: main
      runtime: script
      script: {rules: [{reply: REPLY_SKIP}]}
    - id: oa
      runtime: openai
      openai: {baseURL: "` + stub.srv.URL + `/v1", model: stub}
`
	if window > 0 {
		yaml += fmt.Sprintf(`  defaults:
    compaction: {reserveTokens: 400, keepRecentTokens: 300}
models: {providers: {openai: {models: [{id: stub, contextWindow: %d}]}}}
`, window)
	}
	ks := &killStack{Stack: s, cfgPath: filepath.Join(t.TempDir(), "sessionbus.yaml")}
	if err := os.WriteFile(ks.cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ks.creds = bustest.AdminCreds(t, s.Server.Deployment(), s.Operator)
	return ks
}

// gateway starts a gateway process and waits until it is ready.
func (ks *killStack) gateway(t *testing.T, id string) *proc {
	t.Helper()
	p := start(t, "gateway", "--server", ks.Server.URL(), "--id", id, "--creds", ks.creds, "--config", ks.cfgPath,
		"--log-level", "warn", "--ack-wait", killAckWait)
	p.waitLine(t, "ready "+id)
	return p
}

// sigkill kills p at once, with no chance to clean up.
func sigkill(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	p.done <- nil // for start's cleanup
}

// sendAsync queues a turn into key without waiting and returns its run.
func (ks *killStack) sendAsync(t *testing.T, key, msg string) string {
	t.Helper()
	res := ks.MustCall(mainKey, "sessions_send", `{"sessionKey":"`+key+`","message":`+mustJSON(msg)+`,"timeoutSeconds":0}`)
	runID, _ := res["runId"].(string)
	if runID == "" {
		t.Fatalf("send: %v", res)
	}
	return runID
}

// killParts counts the run's prompt and reply entries in key's transcript,
// and the entries holding text.
func killParts(t *testing.T, s *handlerstest.Stack, key, runID, text string) (prompts, replies, holding int) {
	t.Helper()
	es, _, err := s.Worker.Deps.Transcripts.Tail(bustest.Context(t), bus.EncodeKey(key), 500, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		var m struct {
			Marker *struct{ Run, Part string } `json:"__sessionbus"`
		}
		_ = json.Unmarshal(e.Data, &m)
		if m.Marker != nil && m.Marker.Run == runID {
			switch m.Marker.Part {
			case "prompt":
				prompts++
			case "reply":
				replies++
			}
		}
		if text != "" && strings.Contains(string(e.Data), text) {
			holding++
		}
	}
	return prompts, replies, holding
}

// turnOnce is a hold that stops the first request of the kind (a turn
// when summary is false, else a compaction's summary) after writing
// partial as its first streamed delta ("" writes nothing): it closes
// reached and never answers.
func turnOnce(summary bool, partial string, reached chan struct{}) func(w http.ResponseWriter, r *http.Request, isSummary bool) bool {
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request, isSummary bool) bool {
		first := false
		if isSummary == summary {
			once.Do(func() { first = true })
		}
		if !first {
			return false
		}
		if partial != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": partial}}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		close(reached)
		<-r.Context().Done() // the gateway dies holding the request
		return true
	}
}

// TestGatewaySIGKILLMidStream: a gateway process SIGKILLed while the
// model's reply streams (a subscriber of sb.live.<key> has its first
// delta) leaves no half turn: another gateway process runs the
// redelivered run once more, to the end, and the transcript has the one
// prompt and the one whole reply, none of the cut reply.
func TestGatewaySIGKILLMidStream(t *testing.T) {
	stub := newModelStub(t, true)
	reached := make(chan struct{})
	stub.hold = turnOnce(false, "HALF-A-REPL", reached)
	ks := newKillStack(t, stub, 0)
	live := make(chan bus.LiveEvent, 64)
	sub, err := ks.Conn.Subscribe(bus.NewNames("").Live(bus.EncodeKey(turnsTarget)), func(m *nats.Msg) {
		var ev bus.LiveEvent
		if json.Unmarshal(m.Data, &ev) == nil {
			live <- ev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	victim := ks.gateway(t, "gw-a")
	runID := ks.sendAsync(t, turnsTarget, "tell me everything")
	timeout := time.After(60 * time.Second)
	for seen := false; !seen; { // the first delta, as a watcher renders it
		select {
		case ev := <-live:
			seen = ev.Type == "text" && ev.Delta == "HALF-A-REPL"
		case <-timeout:
			t.Fatal("no first delta on the live subject")
		}
	}
	<-reached
	sigkill(t, victim)
	ks.gateway(t, "gw-b")

	rec := runstest.WaitRun(t, ks.Worker.Deps.Runs, runID, 90*time.Second)
	if rec.Status != runs.OK || rec.Attempts != 2 || rec.Gateway != "gw-b" || !strings.HasPrefix(rec.Reply, "reply ") {
		t.Fatalf("run record after the kill: %+v", rec)
	}
	prompts, replies, half := killParts(t, ks.Stack, turnsTarget, runID, "HALF-A-REPL")
	if prompts != 1 || replies != 1 || half != 0 {
		t.Fatalf("transcript: %d prompts, %d replies, %d entries with the cut reply; want 1, 1, 0", prompts, replies, half)
	}
	if turns, _ := stub.split(); len(turns) != 2 {
		t.Fatalf("%d turn requests, want 2 (the cut one and the redelivered one)", len(turns))
	}
}

// TestCompactionSIGKILL: a gateway process SIGKILLed while it compacts
// (its summary request unanswered) leaves no compaction entry, and one
// SIGKILLed after compacting (its turn's request unanswered) leaves the
// whole entry; either way another gateway process runs the turn that
// needed it exactly once, with one compaction in the transcript.
func TestCompactionSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name        string
		inSummary   bool // killed during the summary request, else during the turn's
		entriesKill int  // compaction entries right after the kill
		turns       int  // turn requests in all
	}{
		{"during the summary", true, 0, 1},
		{"after the compaction", false, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := newModelStub(t, true)
			reached := make(chan struct{})
			stub.hold = turnOnce(tc.inSummary, "", reached)
			ks := newKillStack(t, stub, 2000)
			seedLines(ks.Stack, turnsTarget, 60, 120)
			victim := ks.gateway(t, "gw-a")
			runID := ks.sendAsync(t, turnsTarget, "the question")
			select {
			case <-reached:
			case <-time.After(60 * time.Second):
				t.Fatal("the held request never came")
			}
			sigkill(t, victim)
			_, summariesAtKill := stub.split()
			if n := countCompactions(t, ks.Stack, turnsTarget); n != tc.entriesKill {
				t.Fatalf("%d compaction entries after the kill, want %d", n, tc.entriesKill)
			}
			ks.gateway(t, "gw-b")
			rec := runstest.WaitRun(t, ks.Worker.Deps.Runs, runID, 90*time.Second)
			if rec.Status != runs.OK || rec.Attempts != 2 || !strings.HasPrefix(rec.Reply, "reply ") {
				t.Fatalf("run record: %+v", rec)
			}
			if n := countCompactions(t, ks.Stack, turnsTarget); n != 1 {
				t.Fatalf("%d compaction entries, want 1", n)
			}
			if prompts, replies, _ := killParts(t, ks.Stack, turnsTarget, runID, ""); prompts != 1 || replies != 1 {
				t.Fatalf("transcript: %d prompts, %d replies of the run, want 1 and 1", prompts, replies)
			}
			// a compaction may ask for several summaries (one per chunk):
			// after a kill during one, the next gateway compacts anew;
			// after a whole compaction, it never asks again
			turns, summaries := stub.split()
			if again := len(summaries) > len(summariesAtKill); again != tc.inSummary || len(turns) != tc.turns {
				t.Fatalf("%d summary requests (%d at the kill) and %d turn requests (want %d)", len(summaries), len(summariesAtKill), len(turns), tc.turns)
			}
			bustest.WaitFor(t, 10*time.Second, "compactionCount 1", func() bool {
				return sessionEntry(t, ks.Stack, turnsTarget).Rares().CompactionCount == 1
			})
		})
	}
}
