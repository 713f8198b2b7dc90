package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/signals"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

const opsMain = "agent:ops:main"

// put writes entries and waits until the worker's index has them all.
func put(s *handlerstest.Stack, es ...*sessions.Entry) {
	s.T.Helper()
	for _, e := range es {
		if e.SessionID == "" {
			e.SessionID = sessions.NewID()
		}
		s.Put(e)
	}
	if err := s.Worker.Deps.Index.Sync(bustest.Context(s.T)); err != nil {
		s.T.Fatal(err)
	}
}

// statusErr calls session_status expecting a thrown error with exactly want.
func statusErr(t *testing.T, s *handlerstest.Stack, c bus.Caller, params, want string) {
	t.Helper()
	res, err := s.CallAs(c, "session_status", params)
	if e, ok := bus.AsError(err); !ok || e.Code != 400 || e.Message != want {
		t.Errorf("%s as %s: got %v %v, want thrown %q", params, c.SessionKey, res, err, want)
	}
}

func cardLines(t *testing.T, res map[string]any) []string {
	t.Helper()
	text, ok := res["statusText"].(string)
	if !ok {
		t.Fatalf("no statusText: %v", res)
	}
	card, _, _ := strings.Cut(text, "\n\n")
	return strings.Split(card, "\n")
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

func TestStatusThrownErrors(t *testing.T) {
	uuid := "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	me := bus.Caller{SessionKey: mainKey}
	s := handlerstest.Start(t, nil)
	put(s, &sessions.Entry{Key: mainKey}, &sessions.Entry{Key: "agent:main:other"}, &sessions.Entry{Key: opsMain},
		&sessions.Entry{Key: "cron:nightly"})
	for params, want := range map[string]string{
		`{"sessionKey":"cron:missing"}`:                      "Unknown sessionKey: cron:missing",
		`{"sessionKey":"agent:main:nope"}`:                   "Session status visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
		`{"sessionKey":"` + uuid + `"}`:                      "Unknown sessionId: " + uuid,
		`{"sessionKey":"no-such-label"}`:                     "Unknown sessionId: no-such-label",
		`{"sessionKey":"agent:ops:main"}`:                    "Agent-to-agent status is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
		`{"sessionKey":"agent:main:other"}`:                  "Session status visibility is restricted to the current session tree (tools.sessions.visibility=tree).",
		`{"changesSince":-1}`:                                "changesSince must be a non-negative integer",
		`{"changesSince":1.5}`:                               "changesSince must be a non-negative integer",
		`{"model":5}`:                                        "model must be a string",
		`{"thinkingLevel":true}`:                             "thinkingLevel must be a string",
		`{"sessionKey":7}`:                                   "sessionKey must be a string",
		`{"model":"openai/"}`:                                `Unrecognized model "openai/".`,
		`{"model":"/gpt-4o"}`:                                `Unrecognized model "/gpt-4o".`,
		`{"thinkingLevel":"turbo"}`:                          `Thinking level "turbo" is not supported for default. Use one of: off, minimal, low, medium, high, xhigh.`,
		`{"thinkingLevel":"turbo","model":"openai/gpt-4.1"}`: `Thinking level "turbo" is not supported for openai/gpt-4.1. Use one of: off, minimal, low, medium, high, xhigh.`,
	} {
		statusErr(t, s, me, params, want)
	}
	if _, err := s.Call(mainKey, "session_status", `{"sessionKey":"agent:main:a b"}`); err == nil || !strings.Contains(err.Error(), "is invalid") {
		t.Errorf("malformed key: %v", err)
	}
	// a failed call writes nothing: the model of the call above was not set
	if e := s.Worker.Deps.Index.Get(mainKey); e.Rares().ModelOverride != "" || e.Rares().ThinkingLevel != "" {
		t.Errorf("a refused call wrote %+v", e)
	}
	// a legacy key found as typed is checked as the caller itself, but a
	// spawned-restricted sandbox still only sees its own tree
	s.MustCall(mainKey, "session_status", `{"sessionKey":"cron:nightly"}`)
	statusErr(t, s, bus.Caller{SessionKey: mainKey, Sandboxed: true}, `{"sessionKey":"cron:nightly"}`,
		"Session status visibility is restricted to the current session tree.")

	self := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "self" })
	put(self, &sessions.Entry{Key: mainKey}, &sessions.Entry{Key: "agent:main:subagent:c1", SpawnedBy: mainKey})
	statusErr(t, self, me, `{"sessionKey":"agent:main:subagent:c1"}`,
		"Session status visibility is restricted to the current session (tools.sessions.visibility=self).")

	agent := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "agent" })
	put(agent, &sessions.Entry{Key: mainKey})
	statusErr(t, agent, me, `{"sessionKey":"agent:main:nope"}`, "Unknown sessionKey: agent:main:nope")

	a2a := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.AgentToAgent.Enabled = true
		c.Tools.AgentToAgent.Allow = []string{"main"}
	})
	opsID := "11111111-2222-4333-8444-555555555555"
	put(a2a, &sessions.Entry{Key: mainKey}, &sessions.Entry{Key: opsMain, SessionID: opsID})
	statusErr(t, a2a, me, `{"sessionKey":"agent:ops:main"}`, "Agent-to-agent session status denied by tools.agentToAgent.allow.")
	// a sessionId resolving into another agent meets the same gate
	statusErr(t, a2a, me, `{"sessionKey":"`+opsID+`"}`, "Agent-to-agent session status denied by tools.agentToAgent.allow.")

	open := handlerstest.Start(t, func(c *config.Config) { c.Tools.AgentToAgent.Enabled = true })
	put(open, &sessions.Entry{Key: mainKey}, &sessions.Entry{Key: opsMain})
	statusErr(t, open, me, `{"sessionKey":"agent:ops:main"}`,
		"Session status visibility is restricted. Set tools.sessions.visibility=all and tools.agentToAgent.enabled=true to allow cross-agent access; use tools.agentToAgent.allow to restrict permitted agent pairs.")
}

func TestStatusResolution(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
	})
	mainID, opsID := sessions.NewID(), sessions.NewID()
	put(s, &sessions.Entry{Key: mainKey, SessionID: mainID}, &sessions.Entry{Key: "agent:main:subagent:c1", SpawnedBy: mainKey},
		&sessions.Entry{Key: opsMain, SessionID: opsID})
	for ref, want := range map[string]string{
		``:                                       mainKey,
		`"sessionKey":"current",`:                mainKey,
		`"sessionKey":"main",`:                   mainKey,
		`"session_key":"main",`:                  mainKey,
		`"sessionKey":"` + mainID:                mainKey,
		`"sessionKey":"subagent:c1",`:            "agent:main:subagent:c1",
		`"sessionKey":"agent:main:subagent:c1",`: "agent:main:subagent:c1",
		`"sessionKey":"agent:ops:main",`:         opsMain,
		`"sessionKey":"` + opsID:                 opsMain,
	} {
		params := "{" + strings.TrimSuffix(ref, ",") + "}"
		if strings.HasSuffix(ref, mainID) || strings.HasSuffix(ref, opsID) {
			params = "{" + ref + `"}`
		}
		res := s.MustCall(mainKey, "session_status", params)
		if res["ok"] != true || res["sessionKey"] != want || res["stateVersion"] != float64(0) || res["changedModel"] != false {
			t.Errorf("%s: %v, want sessionKey %s", params, res, want)
		}
		if _, has := res["stateChanges"]; has {
			t.Errorf("%s: stateChanges without changesSince: %v", params, res)
		}
		if _, has := res["modelOverride"]; has {
			t.Errorf("%s: modelOverride without model: %v", params, res)
		}
	}
	// "main" from another agent is that agent's own main session
	if got := s.MustCall(opsMain, "session_status", `{"sessionKey":"main"}`)["sessionKey"]; got != opsMain {
		t.Errorf("ops main = %v", got)
	}

	// with agent-to-agent off, another agent's sessionId is not found at all
	closed := handlerstest.Start(t, nil)
	put(closed, &sessions.Entry{Key: mainKey}, &sessions.Entry{Key: opsMain, SessionID: opsID})
	statusErr(t, closed, bus.Caller{SessionKey: mainKey}, `{"sessionKey":"`+opsID+`"}`, "Unknown sessionId: "+opsID)
}

func TestStatusCard(t *testing.T) {
	s := handlerstest.Start(t, nil)
	put(s, &sessions.Entry{
		Key: mainKey, UpdatedAt: time.Now().Add(-5*time.Minute - 20*time.Second).UnixMilli(),
		InputTokens: 1200, OutputTokens: 300, TotalTokens: 1500, ContextTokens: 200_000,
		Rare: &sessions.RareFields{CacheRead: 800, CacheWrite: 200, CompactionCount: 2}, Status: "failed", AbortedLastRun: true,
	},
		&sessions.Entry{Key: "agent:main:subagent:c1", SpawnedBy: mainKey, Status: "running"},
		&sessions.Entry{Key: "agent:main:subagent:c2", ParentSessionKey: mainKey},
		&sessions.Entry{Key: "agent:main:idle"},
	)
	lines := cardLines(t, s.MustCall(mainKey, "session_status", `{}`))
	if !strings.HasPrefix(lines[0], "🦞 sessionbus "+bus.Version) {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "🕒 Time: ") {
		t.Errorf("time line %q", lines[1])
	}
	want := []string{
		"🧠 Model: default",
		"🧮 Tokens: 1.2k in / 300 out",
		"🗄️ Cache: 36% hit · 800 cached, 200 new",
		"📚 Context: 1.5k/200k (0%) · 🧹 Compactions: 2",
		"🧵 Session: agent:main:main • updated 5m ago",
		"🤖 Subagents: 2 (1 running)",
		"📌 Tasks: latest failed · aborted",
		"⚙️ Runtime: script · Think: off",
		"🪢 Queue: steer",
	}
	if got := lines[2:]; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("card:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// a session with nothing to report has only the lines that always apply
	idle := cardLines(t, s.MustCall("agent:main:idle", "session_status", `{}`))
	if got := strings.Join(idle[2:], "\n"); got != "🧠 Model: default\n🧵 Session: agent:main:idle • no activity\n⚙️ Runtime: script · Think: off\n🪢 Queue: steer" {
		t.Errorf("idle card:\n%s", got)
	}
}

func TestStatusModelOverride(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script"}}
		c.Agents.Defaults.Model = "openai/gpt-4o-mini"
		c.Agents.Defaults.Models = map[string]config.ModelEntry{
			"openai/gpt-4.1":            {Alias: "Big"},
			"anthropic/claude-opus-4-6": {},
		}
	})
	put(s, &sessions.Entry{Key: mainKey})
	entry := func() *sessions.Entry { return s.Worker.Deps.Index.Get(mainKey) }
	check := func(params string, changed bool, override any, model string) map[string]any {
		t.Helper()
		res := s.MustCall(mainKey, "session_status", params)
		if res["changedModel"] != changed || res["modelOverride"] != override || fmt.Sprint(res["modelProvider"], "/", res["model"]) != model {
			t.Fatalf("%s: %v; want changedModel %v, modelOverride %v, model %s", params, res, changed, override, model)
		}
		if !hasLine(cardLines(t, res), "🧠 Model: "+model) {
			t.Fatalf("%s: card model line missing %s: %v", params, model, res["statusText"])
		}
		return res
	}
	check(`{}`, false, nil, "openai/gpt-4o-mini")
	check(`{"model":"big"}`, true, "openai/gpt-4.1", "openai/gpt-4.1")
	if e := entry(); e.Rares().ProviderOverride != "openai" || e.Rares().ModelOverride != "gpt-4.1" {
		t.Fatalf("stored override %q/%q", e.Rares().ProviderOverride, e.Rares().ModelOverride)
	}
	check(`{"model":"openai/gpt-4.1"}`, false, "openai/gpt-4.1", "openai/gpt-4.1")
	// a bare model takes the current override's provider
	statusErr(t, s, bus.Caller{SessionKey: mainKey}, `{"model":"claude-opus-4-6"}`, `Model "openai/claude-opus-4-6" is not allowed.`)
	statusErr(t, s, bus.Caller{SessionKey: mainKey}, `{"model":"openai/gpt-5"}`, `Model "openai/gpt-5" is not allowed.`)
	check(`{"model":"Anthropic/claude-opus-4-6"}`, true, "anthropic/claude-opus-4-6", "anthropic/claude-opus-4-6")
	// the agent's own default is always allowed
	check(`{"model":"openai/gpt-4o-mini","sessionKey":"current"}`, true, "openai/gpt-4o-mini", "openai/gpt-4o-mini")
	check(`{"model":"default"}`, true, nil, "openai/gpt-4o-mini")
	if e := entry(); e.Rares().ProviderOverride != "" || e.Rares().ModelOverride != "" {
		t.Fatalf("reset left %q/%q", e.Rares().ProviderOverride, e.Rares().ModelOverride)
	}
	res := check(`{"model":""}`, false, nil, "openai/gpt-4o-mini")
	if v, has := res["modelOverride"]; !has || v != nil {
		t.Fatalf("modelOverride must be null after a reset: %v", res)
	}
	check(`{"model":"DEFAULT"}`, false, nil, "openai/gpt-4o-mini")
}

func TestStatusThinkingLevel(t *testing.T) {
	s := handlerstest.Start(t, nil)
	put(s, &sessions.Entry{Key: mainKey})
	res := s.MustCall(mainKey, "session_status", `{"thinkingLevel":" HIGH "}`)
	if res["thinkingLevel"] != "high" || res["changedModel"] != false || !hasLine(cardLines(t, res), "⚙️ Runtime: script · Think: high") {
		t.Fatalf("set: %v", res)
	}
	if e := s.Worker.Deps.Index.Get(mainKey); e.Rares().ThinkingLevel != "high" {
		t.Fatalf("stored %q", e.Rares().ThinkingLevel)
	}
	if res := s.MustCall(mainKey, "session_status", `{}`); res["thinkingLevel"] != "high" {
		t.Fatalf("read back: %v", res)
	}
	res = s.MustCall(mainKey, "session_status", `{"thinkingLevel":"default"}`)
	if _, has := res["thinkingLevel"]; has || !hasLine(cardLines(t, res), "⚙️ Runtime: script · Think: off") {
		t.Fatalf("reset: %v", res)
	}
	if e := s.Worker.Deps.Index.Get(mainKey); e.Rares().ThinkingLevel != "" {
		t.Fatalf("reset stored %q", e.Rares().ThinkingLevel)
	}
}

func TestStatusRouteContext(t *testing.T) {
	s := handlerstest.Start(t, nil)
	put(s, &sessions.Entry{
		Key: mainKey, Origin: &sessions.Origin{Provider: "telegram", AccountID: "acc1", ChatType: "direct"},
		DeliveryContext: &sessions.DeliveryContext{Channel: "telegram", To: "chat:42"},
		LastChannel:     "telegram", LastTo: "chat:42", LastAccountID: "acc1",
	},
		&sessions.Entry{Key: "agent:main:discord:channel:77", SpawnedBy: mainKey, LastChannel: "discord", LastTo: "channel:77"},
		&sessions.Entry{Key: "agent:main:subagent:quiet", SpawnedBy: mainKey},
	)
	res := s.MustCall(mainKey, "session_status", `{}`)
	wantBlock := "Route context:\n```json\n" + `{
  "origin": {
    "provider": "telegram",
    "accountId": "acc1"
  },
  "active": {
    "channel": "telegram",
    "to": "chat:42",
    "accountId": "acc1"
  },
  "deliveryContext": {
    "channel": "telegram",
    "to": "chat:42"
  }
}` + "\n```"
	if text := res["statusText"].(string); !strings.HasSuffix(text, "\n\n"+wantBlock) {
		t.Errorf("own session text:\n%s\nwant suffix:\n%s", text, wantBlock)
	}
	if fmt.Sprint(res["origin"]) != "map[accountId:acc1 provider:telegram]" ||
		fmt.Sprint(res["active"]) != "map[accountId:acc1 channel:telegram to:chat:42]" ||
		fmt.Sprint(res["deliveryContext"]) != "map[channel:telegram to:chat:42]" {
		t.Errorf("own session details: %v", res)
	}
	// another session: no active route (it is not the one handling this
	// call); an old entry's origin is read off its key
	res = s.MustCall(mainKey, "session_status", `{"sessionKey":"agent:main:discord:channel:77"}`)
	if _, has := res["active"]; has || fmt.Sprint(res["origin"]) != "map[provider:discord]" {
		t.Errorf("child details: %v", res)
	}
	res = s.MustCall(mainKey, "session_status", `{"sessionKey":"agent:main:subagent:quiet"}`)
	if strings.Contains(res["statusText"].(string), "Route context") || res["origin"] != nil || res["deliveryContext"] != nil {
		t.Errorf("no route: %v", res)
	}
}

func TestStatusUsageBackfill(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.Import(importer.ImportOptions{SessionKey: mainKey},
		`{"role":"user","content":"hi"}`,
		`{"type":"message","message":{"role":"assistant","content":"old","usage":{"input":1,"output":1,"totalTokens":2}}}`,
		`{"type":"message","message":{"role":"assistant","content":"hello","usage":{"input":100,"output":20,"cacheRead":50,"cacheWrite":5,"totalTokens":175,"cost":{"total":0.0012}}}}`,
		`{"role":"user","content":"and now?"}`,
	)
	lines := cardLines(t, s.MustCall(mainKey, "session_status", `{}`))
	for _, want := range []string{
		"🧮 Tokens: 100 in / 20 out · 💵 Cost: $0.0012",
		"🗄️ Cache: 32% hit · 50 cached, 5 new",
		"📚 Context: 175 · 🧹 Compactions: 0",
	} {
		if !hasLine(lines, want) {
			t.Errorf("sparse entry, back-filled: no %q in\n%s", want, strings.Join(lines, "\n"))
		}
	}
	// counters the entry has win; only the missing total is back-filled
	s.Update(mainKey, func(e *sessions.Entry) { e.InputTokens, e.OutputTokens = 7000, 900 })
	lines = cardLines(t, s.MustCall(mainKey, "session_status", `{}`))
	for _, want := range []string{"🧮 Tokens: 7k in / 900 out · 💵 Cost: $0.0012", "📚 Context: 175 · 🧹 Compactions: 0"} {
		if !hasLine(lines, want) {
			t.Errorf("partial entry: no %q in\n%s", want, strings.Join(lines, "\n"))
		}
	}
	// a full entry is shown as it is, the transcript unread
	s.Update(mainKey, func(e *sessions.Entry) { e.TotalTokens = 8000 })
	lines = cardLines(t, s.MustCall(mainKey, "session_status", `{}`))
	for _, want := range []string{"🧮 Tokens: 7k in / 900 out", "📚 Context: 8k · 🧹 Compactions: 0"} {
		if !hasLine(lines, want) {
			t.Errorf("full entry: no %q in\n%s", want, strings.Join(lines, "\n"))
		}
	}
}

// fakeLog is a signal log with fixed answers that records its reads.
type fakeLog struct {
	mu         sync.Mutex
	version    uint64
	changes    handlers.StateChanges
	versionErr error
	sinceErr   error
	reads      []string
}

func (f *fakeLog) StateVersion(_ context.Context, key string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, "version "+key)
	return f.version, f.versionErr
}

func (f *fakeLog) Since(_ context.Context, key string, after uint64, limit int) (handlers.StateChanges, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, fmt.Sprintf("since %s %d %d", key, after, limit))
	return f.changes, f.sinceErr
}

func (f *fakeLog) set(fn func(*fakeLog)) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	reads := f.reads
	f.reads = nil
	fn(f)
	return reads
}

func TestStatusChangesSince(t *testing.T) {
	log := &fakeLog{version: 7, changes: handlers.StateChanges{
		Events: []map[string]any{{"sequence": 5, "kind": "human_direct_message", "actorType": "human",
			"occurredAt": 1700000000000, "summary": "human message via telegram", "payload": map[string]any{"channel": "telegram"}}},
		Truncated: true, EarliestAvailableSequence: 4, HistoryGap: true,
	}}
	s := handlerstest.Start(t, nil, handlers.WithStateLog(log))
	put(s, &sessions.Entry{Key: mainKey})

	res := s.MustCall(mainKey, "session_status", `{}`)
	if res["stateVersion"] != float64(7) || res["stateChanges"] != nil || strings.Contains(res["statusText"].(string), "Session state changes") {
		t.Fatalf("without changesSince: %v", res)
	}
	if reads := log.set(func(*fakeLog) {}); fmt.Sprint(reads) != "[version agent:main:main]" {
		t.Fatalf("reads without changesSince: %v", reads)
	}
	res = s.MustCall(mainKey, "session_status", `{"changesSince":3}`)
	sc, _ := res["stateChanges"].(map[string]any)
	if res["stateVersion"] != float64(7) || sc["truncated"] != true || sc["historyGap"] != true || sc["earliestAvailableSequence"] != float64(4) ||
		fmt.Sprint(sc["events"]) != "[map[actorType:human kind:human_direct_message occurredAt:1.7e+12 payload:map[channel:telegram] sequence:5 summary:human message via telegram]]" {
		t.Fatalf("stateChanges: %v", res)
	}
	wantBlock := "Session state changes:\n```json\n" + `{
  "stateVersion": 7,
  "stateChanges": {
    "events": [
      {
        "actorType": "human",
        "kind": "human_direct_message",
        "occurredAt": 1700000000000,
        "payload": {
          "channel": "telegram"
        },
        "sequence": 5,
        "summary": "human message via telegram"
      }
    ],
    "truncated": true,
    "earliestAvailableSequence": 4,
    "historyGap": true
  }
}` + "\n```"
	if text := res["statusText"].(string); !strings.HasSuffix(text, "\n\n"+wantBlock) {
		t.Errorf("text:\n%s\nwant suffix:\n%s", text, wantBlock)
	}
	reads := log.set(func(f *fakeLog) { f.versionErr, f.sinceErr = errors.New("down"), errors.New("down") })
	if len(reads) != 2 || !hasLine(reads, "since agent:main:main 3 200") {
		t.Fatalf("reads with changesSince: %v", reads)
	}
	// A read error is a retryable 503, never version 0 or an empty delta
	// without a gap (which would tell the caller nothing changed). Each
	// read alone, and the version read without changesSince, too.
	for _, tc := range []struct {
		params           string
		version, changes bool
	}{
		{`{"changesSince":0}`, true, true},
		{`{"changesSince":0}`, false, true},
		{`{"changesSince":0}`, true, false},
		{`{}`, true, false},
	} {
		log.set(func(f *fakeLog) {
			f.versionErr, f.sinceErr = nil, nil
			if tc.version {
				f.versionErr = errors.New("down")
			}
			if tc.changes {
				f.sinceErr = errors.New("down")
			}
		})
		_, err := s.Call(mainKey, "session_status", tc.params)
		if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeUnavailable || !strings.Contains(e.Message, "signal log could not be read") {
			t.Fatalf("%s with version error %v, changes error %v: %v, want a 503", tc.params, tc.version, tc.changes, err)
		}
	}
}

func TestStatusWithoutSignalLog(t *testing.T) {
	s := handlerstest.Start(t, nil)
	put(s, &sessions.Entry{Key: mainKey})
	res := s.MustCall(mainKey, "session_status", `{"changesSince":12}`)
	if res["stateVersion"] != float64(0) || fmt.Sprint(res["stateChanges"]) != "map[earliestAvailableSequence:0 events:[] historyGap:false truncated:false]" {
		t.Fatalf("no log: %v", res)
	}
}

// The worker remembers what each transcript entry said about usage, so a
// repeated card reads only the transcript's end; a newer entry is still
// read and wins.
func TestStatusUsageBackfillFollowsNewEntries(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.Import(importer.ImportOptions{SessionKey: mainKey},
		`{"role":"user","content":"hi"}`,
		`{"type":"message","message":{"role":"assistant","content":"one","usage":{"input":100,"output":20,"totalTokens":120}}}`,
	)
	for range 2 {
		if lines := cardLines(t, s.MustCall(mainKey, "session_status", `{}`)); !hasLine(lines, "🧮 Tokens: 100 in / 20 out") {
			t.Fatalf("first usage: %s", strings.Join(lines, "\n"))
		}
	}
	if _, err := s.Worker.Deps.Transcripts.Append(bustest.Context(t), bus.EncodeKey(mainKey),
		[]byte(`{"type":"message","message":{"role":"assistant","content":"two","usage":{"input":300,"output":40,"totalTokens":340}}}`),
		[]byte(`{"role":"user","content":"and?"}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if lines := cardLines(t, s.MustCall(mainKey, "session_status", `{}`)); !hasLine(lines, "🧮 Tokens: 300 in / 40 out") {
			t.Fatalf("newer usage: %s", strings.Join(lines, "\n"))
		}
	}
}

// The worker keeps each session's latest usage under the transcript's
// newest entry and checks that entry on every card: a write from another
// process (here a store on a connection of its own, as another worker or
// gateway would be) is on the next card, whatever it did to the
// transcript.
func TestStatusUsageFreshAfterWritesElsewhere(t *testing.T) {
	s := handlerstest.Start(t, nil)
	ctx := bustest.Context(t)
	nc, js := bustest.Connect(t, s.Server)
	other, err := transcripts.Open(ctx, nc, js, s.Worker.Deps.Names)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	enc := bus.EncodeKey(mainKey)
	turn := func(in, out int) string {
		return fmt.Sprintf(`{"type":"message","message":{"role":"assistant","content":"r","usage":{"input":%d,"output":%d,"totalTokens":%d}}}`, in, out, in+out)
	}
	want := func(step, line string) {
		t.Helper()
		for range 2 { // the second card is the one the kept usage answers
			lines := cardLines(t, s.MustCall(mainKey, "session_status", `{}`))
			if line == "" {
				for _, l := range lines {
					if strings.HasPrefix(l, "🧮 Tokens") {
						t.Fatalf("%s: want no usage, got %q", step, l)
					}
				}
			} else if !hasLine(lines, line) {
				t.Fatalf("%s: no %q in\n%s", step, line, strings.Join(lines, "\n"))
			}
		}
	}
	appendAll := func(lines ...string) {
		t.Helper()
		var es [][]byte
		for _, l := range lines {
			es = append(es, []byte(l))
		}
		if _, err := other.Append(ctx, enc, es...); err != nil {
			t.Fatal(err)
		}
	}
	s.Import(importer.ImportOptions{SessionKey: mainKey}, `{"role":"user","content":"hi"}`, turn(100, 20), `{"role":"user","content":"and now?"}`)
	want("imported", "🧮 Tokens: 100 in / 20 out")

	// deleted and written again: the newest entry has the same number and
	// bytes as before, only its stream sequence tells it is another one
	if err := other.Delete(ctx, enc); err != nil {
		t.Fatal(err)
	}
	appendAll(`{"role":"user","content":"hi"}`, turn(700, 80), `{"role":"user","content":"and now?"}`)
	want("rewritten", "🧮 Tokens: 700 in / 80 out")

	// a turn whose newest entry carries no usage: read through the index
	appendAll(turn(300, 40), `{"role":"user","content":"next"}`)
	want("appended", "🧮 Tokens: 300 in / 40 out")

	// a turn that ends with its usage record
	appendAll(`{"role":"user","content":"again"}`, turn(500, 60))
	want("appended with usage last", "🧮 Tokens: 500 in / 60 out")

	if err := other.Delete(ctx, enc); err != nil {
		t.Fatal(err)
	}
	want("deleted", "")
}

// A repeated card of an unchanged transcript reads its newest entry only:
// no read of the transcript index. After an append it reads the index, but
// fetches no entry it parsed before (older than the usage record too).
func TestStatusUsageRepeatReadsNewestOnly(t *testing.T) {
	s := handlerstest.Start(t, nil)
	s.Import(importer.ImportOptions{SessionKey: mainKey}, `{"role":"user","content":"hi"}`,
		`{"type":"message","message":{"role":"assistant","content":"r","usage":{"input":100,"output":20,"totalTokens":120}}}`,
		`{"role":"user","content":"and now?"}`)
	s.MustCall(mainKey, "session_status", `{}`)

	names := s.Worker.Deps.Names
	stream := "$JS.API.DIRECT.GET." + names.TranscriptsStream()
	newest := stream + "." + names.Transcript(bus.EncodeKey(mainKey))
	index := "$JS.API.DIRECT.GET.KV_" + names.TranscriptIndexBucket() + ".$KV." + names.TranscriptIndexBucket() + ".h." + bus.EncodeKey(mainKey)
	// gets lists the transcript reads one card makes
	gets := func() []string {
		t.Helper()
		var mu sync.Mutex
		var got []string
		sub, err := s.Conn.Subscribe("$JS.API.DIRECT.GET.>", func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			if strings.HasPrefix(m.Subject, stream) || strings.Contains(m.Subject, names.TranscriptIndexBucket()) {
				got = append(got, m.Subject)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := s.Conn.Flush(); err != nil {
			t.Fatal(err)
		}
		if lines := cardLines(t, s.MustCall(mainKey, "session_status", `{}`)); !hasLine(lines, "🧮 Tokens: 100 in / 20 out") {
			t.Fatalf("card: %s", strings.Join(lines, "\n"))
		}
		// the replies came after the requests: every get of the call is in
		if err := s.Conn.Flush(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	if got := gets(); len(got) != 1 || got[0] != newest {
		t.Fatalf("transcript reads of a repeated card: %q, want only %q", got, newest)
	}
	if _, err := s.Worker.Deps.Transcripts.Append(bustest.Context(t), bus.EncodeKey(mainKey), []byte(`{"role":"user","content":"more"}`)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(gets()); got != fmt.Sprint([]string{newest, index, newest}) {
		t.Fatalf("transcript reads after an append: %s, want the newest entry, then the index head and the newest entry, no entry by sequence", got)
	}
}

// The state version read beside the transcript's newest entry (one wave)
// follows an event another process appends, and a deleted log.
func TestStatusStateVersionFreshAfterAppendElsewhere(t *testing.T) {
	s := handlerstest.Start(t, nil)
	ctx := bustest.Context(t)
	_, js := bustest.Connect(t, s.Server)
	other, err := signals.Open(ctx, js, s.Worker.Deps.Names)
	if err != nil {
		t.Fatal(err)
	}
	// a sparse entry: the card reads the transcript, and the version with it
	s.Import(importer.ImportOptions{SessionKey: mainKey}, `{"role":"user","content":"hi"}`,
		`{"type":"message","message":{"role":"assistant","content":"r","usage":{"input":100,"output":20,"totalTokens":120}}}`)
	version := func() float64 {
		t.Helper()
		res := s.MustCall(mainKey, "session_status", `{}`)
		if !hasLine(cardLines(t, res), "🧮 Tokens: 100 in / 20 out") {
			t.Fatalf("card: %v", res["statusText"])
		}
		v, _ := res["stateVersion"].(float64)
		return v
	}
	before := version()
	for i := range 2 {
		ev, _, err := other.Append(ctx, signals.Event{SessionKey: mainKey, Kind: signals.KindHumanDirectMessage,
			ActorType: signals.ActorHuman, DedupeKey: fmt.Sprint("elsewhere-", i), Summary: "human message via telegram"})
		if err != nil {
			t.Fatal(err)
		}
		if got := version(); got != float64(ev.Sequence) || got <= before {
			t.Fatalf("append %d: stateVersion %v, want %d (was %v)", i, got, ev.Sequence, before)
		}
	}
	if err := other.Delete(ctx, mainKey); err != nil {
		t.Fatal(err)
	}
	if got := version(); got != 0 {
		t.Fatalf("deleted log: stateVersion %v, want 0", got)
	}
}
