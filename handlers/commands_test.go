package handlers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// commandsStack is a worker (no gateway: nothing runs) with a priced
// catalog, the human's session humanKey (owner telegram:42) and two
// children of it: "worker" (registered, its run never queued) and
// "scribe" (its run queued, pending).
func commandsStack(t *testing.T) (*handlerstest.Stack, string, string) {
	t.Helper()
	s := subagentsStack(t, func(c *config.Config) {
		c.Agents.List[0].Model = "openai/gpt-4.1"
		c.Agents.List[0].Script["summary"] = "## Goal\nthe summary"
		// a turn that reports usage, so its announce has a cost
		c.Agents.List[0].Script["rules"] = append([]any{
			map[string]any{"match": "priced job", "reply": "priced done", "usage": map[string]any{"input": 12000, "output": 3000}},
			map[string]any{"match": `\[Subagent Task\]: slow work`, "delayMs": 120_000, "reply": "too late"}, // not its announce
			map[string]any{"match": "change of plan", "reply": "steered: {{message}}"},
		}, c.Agents.List[0].Script["rules"].([]any)...)
		c.Commands.OwnerAllowFrom = []string{"telegram:42"}
		c.Agents.Defaults.Compaction.KeepRecentTokens = 20 // so a short transcript compacts
		c.Models.Providers = map[string]config.ModelProvider{"openai": {Models: []config.CatalogModel{
			{ID: "gpt-4.1", Name: "GPT-4.1", ContextWindow: 128000, Cost: config.ModelCost{Input: 2, Output: 8}},
			{ID: "gpt-4.1-mini", Name: "GPT-4.1 mini", ContextWindow: 128000},
		}}}
	})
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: humanKey, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	worker := spawn(t, s, child{parent: humanKey, label: "worker", task: "dig the hole", noQueue: true})
	scribe := spawn(t, s, child{parent: humanKey, label: "scribe", task: "write it down"})
	return s, worker.ChildSessionKey, scribe.ChildSessionKey
}

// say sends text from telegram:42 in humanKey's DM and returns the reply.
func say(t *testing.T, s *handlerstest.Stack, text string) map[string]any {
	t.Helper()
	res, err := inboundRaw(t, s, s.Token(bus.Caller{Adapter: "telegram"}),
		map[string]any{"sessionKey": humanKey, "channel": "telegram", "from": "42", "text": text, "wait": true, "timeoutSeconds": 5})
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	return res
}

// TestChatCommands: every chat command answers through the ingress with
// OpenClaw's text, queues no turn, and, for bad input (a /subagents target
// that does not resolve, an unknown model or level, a spawn's unknown
// model, /stop with nothing running), writes nothing. An unknown /word is
// an ordinary turn.
func TestChatCommands(t *testing.T) {
	s, worker, scribe := commandsStack(t)
	ctx := bustest.Context(t)
	exact := func(want string) func(string) bool { return func(got string) bool { return got == want } }
	prefix := func(want string) func(string) bool {
		return func(got string) bool { return strings.HasPrefix(got, want) }
	}
	contains := func(parts ...string) func(string) bool {
		return func(got string) bool {
			for _, p := range parts {
				if !strings.Contains(got, p) {
					return false
				}
			}
			return true
		}
	}
	steps := []struct {
		text    string
		ok      func(string) bool
		noWrite bool // bad input: nothing may be written (deliveries aside)
	}{
		{"/status", contains("🧠 Model: openai/gpt-4.1", "🧵 Session: "+humanKey, "🤖 Subagents: 2"), true},
		{"/subagents", prefix("active subagents:\n-----\n1. scribe"), true},
		{"/subagents list", contains("\n2. worker", "\n\nrecent subagents (last 30m):\n-----\n(none)"), true},
		{"/subagents help", exact(strings.Join([]string{"Subagents", "Usage:", "- /subagents list", "- /subagents kill <id|#|all>",
			"- /subagents log <id|#> [limit] [tools]", "- /subagents info <id|#>", "- /subagents send <id|#> <message>",
			"- /subagents steer <id|#> <message>", "- /subagents spawn <agentId> <task> [--model <model>] [--thinking <level>]",
			"- /focus <subagent-label|session-key|session-id|session-label>", "- /unfocus", "- /session idle <duration|off>",
			"- /session max-age <duration|off>", "", "Ids: use the list index (#), runId/session prefix, label, or full session key."}, "\n")), true},
		{"/subagents info worker", prefix("ℹ️ Subagent info\nStatus: running\nLabel: worker\nTask: dig the hole\nRun: "), true},
		{"/subagents info 2", contains("\nSession: "+worker+"\n", "\nTranscript: SB_TRANSCRIPTS/sb.tr."), true},
		{"/subagents info", exact("ℹ️ Usage: /subagents info <id|#>"), true},
		{"/subagents info nosuch", exact("⚠️ Unknown subagent id: nosuch"), true},
		{"/subagents info 9", exact("⚠️ Invalid subagent index: 9"), true},
		{"/subagents info agent:main:subagent:nobody", exact("⚠️ Unknown subagent session: agent:main:subagent:nobody"), true},
		{"/subagents log worker", exact("📜 Subagent log: worker\n(no messages)"), true},
		{"/subagents log", exact("📜 Usage: /subagents log <id|#> [limit]"), true},
		{"/subagents kill", exact("Usage: /subagents kill <id|#|all>"), true},
		{"/subagents kill nosuch", exact("⚠️ Unknown subagent id: nosuch"), true},
		{"/subagents steer worker", exact("Usage: /subagents steer <id|#> <message>"), true},
		{"/subagents steer nosuch go left", exact("⚠️ Unknown subagent id: nosuch"), true},
		{"/subagents send", exact("Usage: /subagents send <id|#> <message>"), true},
		{"/subagents send nosuch hello", exact("⚠️ Unknown subagent id: nosuch"), true},
		{"/subagents spawn main", exact("Usage: /subagents spawn <agentId> <task> [--model <model>] [--thinking <level>]"), true},
		{"/subagents spawn main dig --model bogus/model", exact(`Spawn failed: Model "bogus/model" is not allowed.`), true},
		{"/subagents spawn main dig --model openai/gpt-5", exact(`Spawn failed: Model "openai/gpt-5" is not allowed.`), true},
		{"/subagents bogus", prefix("Subagents\nUsage:\n"), true},
		{"/focus", exact("Usage: /focus <subagent-label|session-key|session-id|session-label>"), true},
		{"/focus nosuch", exact("⚠️ Unable to resolve focus target: nosuch"), true},
		{"/session idle", exact("ℹ️ This conversation is not currently bound."), true},
		{"/unfocus", exact("ℹ️ This conversation is not currently focused."), true},
		{"/focus worker", exact("✅ bound this conversation to " + worker + " (subagent)."), false},
		{"/session idle", prefix("ℹ️ Idle timeout active (24h, next auto-unbind at "), true},
		{"/session idle 90m", prefix("✅ Idle timeout set to 90m for 1 binding (next auto-unbind at "), false},
		{"/session max-age", exact("ℹ️ Max age is currently disabled for this bound session."), true},
		{"/session max-age 2", prefix("✅ Max age set to 2h for 1 binding (hard auto-unbind at "), false},
		{"/session max-age off", exact("✅ Max age disabled for 1 binding."), false},
		{"/session idle soon", exact("Usage: /session idle <duration|off> | /session max-age <duration|off> (example: /session idle 24h)"), true},
		{"/session", exact("Usage: /session idle <duration|off> | /session max-age <duration|off> (example: /session idle 24h)"), true},
		{"/unfocus", exact("✅ Conversation unfocused."), false},
		{"/context", prefix("🧠 /context\n\nWhat counts as context (high-level), plus a breakdown mode."), true},
		{"/context list", exact("🧠 Context breakdown\nSession tokens (cached): 0 total / ctx=128000"), true},
		{"/model", exact("Models (current: openai/gpt-4.1):\n- openai/gpt-4.1 — GPT-4.1\n- openai/gpt-4.1-mini — GPT-4.1 mini"), true},
		{"/model bogus/model", exact(`Model "bogus/model" is not allowed. Use /model to list available models.`), true},
		{"/model anthropic/gpt-4.1", exact(`Model "anthropic/gpt-4.1" is not allowed. Use /model to list available models.`), true},
		{"/model gpt-4.1-mini", exact("Model set to openai/gpt-4.1-mini."), false},
		{"/models", prefix("Models (current: openai/gpt-4.1-mini, default: openai/gpt-4.1):\n"), true},
		{"/model default", exact("Model reset to default (openai/gpt-4.1)."), false},
		{"/think", exact("Current thinking level: off.\nOptions: off, minimal, low, medium, high, xhigh."), true},
		{"/think big", exact(`Unrecognized thinking level "big". Valid levels: off, minimal, low, medium, high, xhigh.`), true},
		{"/think high", exact("Thinking level set to high."), false},
		{"/t: off", exact("Thinking disabled."), false},
		{"/stop", exact(handlers.StopReplyText), true},
		{"/subagents kill scribe", exact(""), false}, // OpenClaw confirms a kill with no message
		{"/subagents kill scribe", exact("scribe is already finished."), true},
	}
	for _, st := range steps {
		before := writesOf(t, s)
		delete(before, s.Worker.Deps.Names.DeliverStream())
		res := say(t, s, st.text)
		got, _ := res["reply"].(string)
		if res["status"] != "ok" || !st.ok(got) {
			t.Fatalf("%q answered %q (status %v)", st.text, got, res["status"])
		}
		if st.noWrite {
			after := writesOf(t, s)
			delete(after, s.Worker.Deps.Names.DeliverStream())
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("%q wrote: before %v after %v", st.text, before, after)
			}
		}
	}
	// what the writing commands wrote
	e, _, err := s.Worker.Deps.Store.Get(ctx, humanKey)
	if err != nil || e.Rares().ModelOverride != "" || e.Rares().ThinkingLevel != "" {
		t.Fatalf("after /model default and /t off: %+v %v", e.Rares(), err)
	}
	if rec, _, err := s.Worker.Deps.Runs.Get(ctx, runIDOf(t, s, scribe)); err != nil || rec.Status != runs.Killed {
		t.Fatalf("scribe's run after /subagents kill: %+v %v", rec, err)
	}
	// an unknown /word is the model's, as OpenClaw passes it: a turn
	res, err := inboundRaw(t, s, s.Token(bus.Caller{Adapter: "telegram"}),
		map[string]any{"sessionKey": humanKey, "channel": "telegram", "from": "42", "text": "/frobnicate the widget"})
	if err != nil || res["status"] != "accepted" || res["reply"] != nil {
		t.Fatalf("/frobnicate: %v %v", res, err)
	}
	if st := runStatus(t, s, res["runId"].(string)); st != string(runs.Pending) {
		t.Fatalf("an unknown /word queued no turn: run %q", st)
	}
}

// runIDOf is the run of a child.
func runIDOf(t *testing.T, s *handlerstest.Stack, key string) string {
	t.Helper()
	rec, _, err := s.Worker.Deps.Subagents.Get(bustest.Context(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return rec.RunID
}

// TestChatCommandsRun: the commands that need a gateway: /subagents spawn
// starts a child (its model checked against the catalog), /subagents send
// answers with the child's reply, /compact compacts the session.
func TestChatCommandsRun(t *testing.T) {
	s, _, _ := commandsStack(t)
	startGateway(t, s)
	ctx := bustest.Context(t)
	for i := range 6 {
		if _, err := s.Worker.Deps.Transcripts.Append(ctx, bus.EncodeKey(humanKey), fmt.Appendf(nil, `{"role":"user","content":"message %d with some words in it"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	got := say(t, s, "/subagents spawn main quick job --model openai/gpt-4.1-mini")["reply"].(string)
	var key, run string
	if _, err := fmt.Sscanf(got, "Spawned subagent main (session %s run %8s).", &key, &run); err != nil || !strings.HasSuffix(key, ",") {
		t.Fatalf("/subagents spawn: %q (%v)", got, err)
	}
	key = strings.TrimSuffix(key, ",")
	rec, _, err := s.Worker.Deps.Subagents.Get(ctx, key)
	if err != nil || !strings.HasPrefix(rec.RunID, run) || rec.Model != "openai/gpt-4.1-mini" {
		t.Fatalf("spawned child %s: %+v %v", key, rec, err)
	}
	waitRun(t, s, rec.RunID)
	if got := say(t, s, "/subagents send "+key+" quick follow-up")["reply"]; got != "done: quick follow-up" {
		t.Fatalf("/subagents send: %q", got)
	}
	// a running child is steered: its run restarts on the message
	got = say(t, s, "/subagents spawn main slow work")["reply"].(string)
	slow := strings.TrimSuffix(strings.Fields(got)[4], ",")
	bustest.WaitFor(t, 30*time.Second, "the slow child's run to start", func() bool {
		r, _, err := s.Worker.Deps.Subagents.Get(ctx, slow)
		return err == nil && r.StartedAt > 0
	})
	got = say(t, s, "/subagents steer "+slow+" quick change of plan")["reply"].(string)
	after, _, err := s.Worker.Deps.Subagents.Get(ctx, slow)
	if err != nil || got != "steered slow work (run "+after.RunID[:8]+")." {
		t.Fatalf("/subagents steer: %q (%v)", got, err)
	}
	if r := waitRun(t, s, after.RunID); !strings.HasPrefix(r.Reply, "steered: ") || !strings.Contains(r.Reply, "quick change of plan") {
		t.Fatalf("the steered run: %+v", r)
	}
	// the announce of a child on a priced model: its stats line shows the
	// estimate at the catalog's prices (12k in at $2/M, 3k out at $8/M)
	// and where its transcript is
	got = say(t, s, "/subagents spawn main priced job --model openai/gpt-4.1")["reply"].(string)
	if !strings.HasPrefix(got, "Spawned subagent main (session ") {
		t.Fatalf("/subagents spawn: %q", got)
	}
	priced := strings.TrimSuffix(strings.Fields(got)[4], ",")
	want := "• est $0.05 • transcript SB_TRANSCRIPTS/sb.tr." + bus.EncodeKey(priced)
	defer func() {
		if t.Failed() {
			r, _, err := s.Worker.Deps.Subagents.Get(ctx, priced)
			t.Logf("priced child %s: model %q in %d out %d %v", priced, r.Model, r.InputTokens, r.OutputTokens, err)
			for _, m := range transcript(t, s, humanKey) {
				if i := strings.Index(m[1], "session_key:"); i >= 0 {
					t.Logf("%s: %.80s", m[0], m[1][i:])
				} else {
					t.Logf("%s: %.80s", m[0], m[1])
				}
			}
		}
	}()
	bustest.WaitFor(t, 30*time.Second, "the priced child's announce in the requester", func() bool {
		for _, m := range transcript(t, s, humanKey) {
			if strings.Contains(m[1], "session_key: "+priced) && strings.Contains(m[1], want) {
				return true
			}
		}
		return false
	})
	got = say(t, s, "/compact keep the names")["reply"].(string)
	if !strings.HasPrefix(got, "⚙️ Compacted • Context ") || !strings.HasSuffix(got, "/128k") && !strings.Contains(got, "/128k (") {
		t.Fatalf("/compact: %q", got)
	}
}

// TestSpawnModelCatalog: sessions_spawn checks its model against the
// provider catalog as OpenClaw's gateway does: an unknown provider or an
// unknown model of a known provider is refused with OpenClaw's text before
// anything is written; a cataloged one spawns.
func TestSpawnModelCatalog(t *testing.T) {
	s, _, _ := commandsStack(t)
	for _, tc := range []struct{ model, ref string }{
		{"bogus/model", "bogus/model"},         // a provider the catalog does not know
		{"openai/gpt-typo", "openai/gpt-typo"}, // a model it does not list
		{"gpt-typo", "openai/gpt-typo"},        // a bare id takes the agent's provider
	} {
		before := writesOf(t, s)
		res := s.MustCall(humanKey, "sessions_spawn", fmt.Sprintf(`{"task":"dig","model":%q}`, tc.model))
		if want := fmt.Sprintf("Model %q is not allowed.", tc.ref); res["status"] != "error" || res["error"] != want {
			t.Fatalf("spawn with %s: %v, want error %q", tc.model, res, want)
		}
		if after := writesOf(t, s); fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("a refused spawn (%s) wrote: before %v after %v", tc.model, before, after)
		}
	}
	if res := s.MustCall(humanKey, "sessions_spawn", `{"task":"dig","model":"openai/gpt-4.1-mini"}`); res["status"] != "accepted" {
		t.Fatalf("spawn with a cataloged model: %v", res)
	}
}
