package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// writeCounts is the message count of every stream a spawn may write, so
// a refused spawn can be shown to have written nothing.
func writeCounts(t *testing.T, s *handlerstest.Stack) map[string]uint64 {
	t.Helper()
	d := s.Worker.Deps
	js, err := jetstream.New(s.Conn)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, name := range []string{d.Subagents.Streams()[0], d.Runs.Streams()[0], d.Store.Streams()[0], d.Transcripts.StreamName(), d.Queue.Streams()[0]} {
		st, err := js.Stream(bustestCtx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(bustestCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = info.State.Msgs
	}
	return out
}

func bustestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sameCounts(t *testing.T, before, after map[string]uint64, what string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s wrote to %s: %d → %d messages", what, k, v, after[k])
		}
	}
}

func spawnStack(t *testing.T, edit func(*config.Config)) *handlerstest.Stack {
	s := handlerstest.Start(t, edit)
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: mainKey, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	if err := s.Worker.Deps.Index.Sync(bustestCtx(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSpawnThrownErrors(t *testing.T) {
	s := spawnStack(t, nil)
	before := writeCounts(t, s)
	cases := map[string]string{
		`{}`:                                                      "task required",
		`{"task":"   "}`:                                          "task required",
		`{"task":7}`:                                              "task must be a string",
		`{"task":"x","to":"bob"}`:                                 `sessions_spawn does not support "to". Use "message" or "sessions_send" for channel delivery.`,
		`{"task":"x","reply_to":null}`:                            `sessions_spawn does not support "reply_to". Use "message" or "sessions_send" for channel delivery.`,
		`{"to":"x"}`:                                              `sessions_spawn does not support "to". Use "message" or "sessions_send" for channel delivery.`,
		`{"task":"x","label":3}`:                                  "label must be a string",
		`{"task":"x","agentId":false}`:                            "agentId must be a string",
		`{"task":"x","thread":"yes"}`:                             "thread must be a boolean: send true or false, not a string",
		`{"task":"x","mode":"forever"}`:                           `mode must be "run" or "session" (got "forever")`,
		`{"task":"x","cleanup":"trash"}`:                          `cleanup must be "delete" or "keep" (got "trash")`,
		`{"task":"x","sandbox":"off"}`:                            `sandbox must be "inherit" or "require" (got "off")`,
		`{"task":"x","context":"shared"}`:                         `context must be "fork" or "isolated" (got "shared")`,
		`{"task":"x","streamTo":"child"}`:                         `streamTo must be "parent" (got "child")`,
		`{"task":"x","lightContext":1}`:                           "lightContext must be a boolean: send true or false",
		`{"task":"x","runTimeoutSeconds":-1}`:                     "runTimeoutSeconds must be a non-negative number of seconds (0 = no timeout)",
		`{"task":"x","runTimeoutSeconds":"soon"}`:                 "runTimeoutSeconds must be a non-negative number of seconds (0 = no timeout)",
		`{"task":"x","timeoutSeconds":true}`:                      "timeoutSeconds must be a non-negative number of seconds (0 = no timeout)",
		`{"task":"x","runTimeoutSeconds":30,"timeoutSeconds":60}`: "runTimeoutSeconds (30) and timeoutSeconds (60), its legacy alias, disagree; pass only runTimeoutSeconds",
		`{"task":"x","runtime":"acp","lightContext":true}`:        "lightContext is only supported for runtime='subagent'.",
		`{"task":"x","runtime":"acp","context":"fork"}`:           `context="fork" is only supported for runtime="subagent".`,
		`{"task":"x","attachments":"a.txt"}`:                      `attachments must be an array of {name, content, encoding?: "utf8"|"base64", mimeType?} objects`,
		`{"task":"x","attachments":[1]}`:                          `attachments must be an array of {name, content, encoding?: "utf8"|"base64", mimeType?} objects; item 0 is not an object`,
		`{"task":"x","attachments":[{"name":"a"}]}`:               "attachments[0].content must be a string (the file's text, or its bytes in base64)",
		`{"task":"x","attachments":[{"name":"a","content":"x","encoding":"hex"}]}`: `attachments[0].encoding must be "utf8" or "base64"`,
		`{"task":"x","attachAs":{"mountPath":"../up"}}`:                            `attachAs.mountPath "../up" must be a relative path inside the child's workspace (no leading / and no ..)`,
		`{"task":"x","attachAs":"in"}`:                                             `attachAs must be an object such as {"mountPath": "inputs"}`,
		`{"task":"x","idempotencyKey":"` + strings.Repeat("k", 257) + `"}`:         "idempotencyKey must be at most 256 bytes (got 257)",
	}
	for params, want := range cases {
		_, err := s.Call(mainKey, "sessions_spawn", params)
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != bus.CodeBadRequest || be.Message != want {
			t.Errorf("%s: got %v, want 400 %q", params, err, want)
		}
	}
	sameCounts(t, before, writeCounts(t, s), "a thrown spawn")
}

func TestSpawnReturnedErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	yes := true
	for _, c := range []struct {
		name, caller, params string
		edit                 func(*config.Config)
		sandboxed            bool
		status, err          string
	}{
		{name: "streamTo", params: `{"task":"x","streamTo":"parent"}`, status: "error", err: "streamTo is only supported for runtime=acp; got runtime=subagent"},
		{name: "resume", params: `{"task":"x","resumeSessionId":"abc"}`, status: "error", err: "resumeSessionId is only supported for runtime=acp; got runtime=subagent"},
		{name: "acp attachments", params: `{"task":"x","runtime":"acp","attachments":[{"name":"a","content":"b"}]}`, status: "error", err: "attachments are not supported for runtime=acp; use runtime=subagent or omit attachments"},
		{name: "agent id", params: `{"task":"x","agentId":"bad id!"}`, status: "error", err: `Invalid agentId "bad id!". Agent IDs must match [a-z0-9][a-z0-9_-]{0,63}. Use agents_list to discover valid targets.`},
		{name: "session mode", params: `{"task":"x","mode":"session"}`, status: "error", err: `mode="session" requires thread=true so the subagent can stay bound to a thread.`},
		{name: "depth", caller: "agent:main:subagent:c1", params: `{"task":"x"}`, edit: func(c *config.Config) { c.Tools.Subagents.Tools.AlsoAllow = []string{"sessions_spawn"} }, status: "forbidden", err: "sessions_spawn is not allowed at this depth (current depth: 1, max: 1)"},
		{name: "require agent", params: `{"task":"x"}`, edit: func(c *config.Config) { c.Agents.Defaults.Subagents.RequireAgentID = &yes },
			status: "forbidden", err: "sessions_spawn requires explicit agentId when requireAgentId is configured. Use agents_list to see allowed agent ids."},
		{name: "allowlist none", params: `{"task":"x","agentId":"ops"}`, status: "forbidden", err: "agentId is not allowed for sessions_spawn (allowed: none)"},
		{name: "allowlist list", params: `{"task":"x","agentId":"ops"}`, edit: func(c *config.Config) { c.Agents.Defaults.Subagents.AllowAgents = []string{"Research", " writer "} },
			status: "forbidden", err: "agentId is not allowed for sessions_spawn (allowed: research, writer)"},
		{name: "sandbox inherit", params: `{"task":"x"}`, sandboxed: true, status: "forbidden", err: "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime."},
		{name: "sandbox require", params: `{"task":"x","sandbox":"require"}`, status: "forbidden", err: `sessions_spawn sandbox="require" needs a sandboxed target runtime. Pick a sandboxed agentId or use sandbox="inherit".`},
		{name: "thinking", params: `{"task":"x","thinking":"deep"}`, status: "error", err: `Invalid thinking level "deep". Use one of: off, minimal, low, medium, high, xhigh.`},
		{name: "model not allowed", params: `{"task":"x","model":"openai/gpt-5"}`, edit: allowModels, status: "error", err: `Model "openai/gpt-5" is not allowed.`},
		{name: "model from config not allowed", params: `{"task":"x"}`, edit: func(c *config.Config) {
			allowModels(c)
			c.Agents.Defaults.Subagents.Model = "anthropic/claude-opus-4-6"
		},
			status: "error", err: `Model "anthropic/claude-opus-4-6" is not allowed.`},
		{name: "model unrecognized", params: `{"task":"x","model":"openai/"}`, status: "error", err: `Unrecognized model "openai/".`},
		{name: "thinking from config", params: `{"task":"x"}`, edit: func(c *config.Config) { c.Agents.Defaults.Subagents.Thinking = "max" }, status: "error", err: `Invalid thinking level "max". Use one of: off, minimal, low, medium, high, xhigh.`},
		{name: "fork cross agent", params: `{"task":"x","agentId":"ops","context":"fork"}`, edit: func(c *config.Config) { c.Agents.Defaults.Subagents.AllowAgents = []string{"*"} },
			status: "error", err: `context="fork" needs the requester's own agent (main); got agentId=ops. Use context="isolated" to spawn another agent.`},
		{name: "acp not exec", params: `{"task":"x","runtime":"acp"}`, status: "error", err: "runtime=acp runs an external harness: agent main needs runtime: exec in agents.list (with exec.command naming the harness)"},
		{name: "thread without route", params: `{"task":"x","thread":true}`, status: "error", err: "thread=true requires an active channel conversation context."},
		{name: "too many files", params: attachmentsParams(51, "a"), status: "error", err: "attachments: at most 50 files per spawn (got 51)"},
		{name: "bad base64", params: `{"task":"x","attachments":[{"name":"a.bin","content":"!!notbase64","encoding":"base64"}]}`, status: "error",
			err: `attachments[0] (a.bin): content is not valid base64 (illegal base64 data at input byte 0); send standard base64, or encoding "utf8" for text`},
		{name: "file too big", params: `{"task":"x","attachments":[{"name":"big","content":"` + strings.Repeat("a", 256<<10+1) + `"}]}`, status: "error", err: "attachments[0] (big) is 262145 bytes; one file may be at most 262144 bytes"},
		{name: "total too big", params: `{"task":"x","attachments":[` + strings.TrimSuffix(strings.Repeat(`{"name":"f","content":"`+strings.Repeat("b", 200<<10)+`"},`, 1), ",") + `,{"name":"g","content":"` + strings.Repeat("b", 200<<10) + `"},{"name":"h","content":"` + strings.Repeat("b", 200<<10) + `"}]}`,
			status: "error", err: "attachments total more than 524288 bytes (614400 after attachments[2]); send fewer or smaller files"},
		{name: "path name", params: `{"task":"x","attachments":[{"name":"../etc/passwd","content":"x"}]}`, status: "error", err: `attachments[0].name "../etc/passwd" must be a plain file name (no /, \ or NUL, not . or ..)`},
		{name: "missing name", params: `{"task":"x","attachments":[{"content":"x"}]}`, status: "error", err: `attachments[0].name is required (a file name such as "notes.md")`},
		{name: "duplicate name", params: `{"task":"x","attachments":[{"name":"a","content":"x"},{"name":"a","content":"y"}]}`, status: "error", err: `attachments[1].name "a" is used twice; file names must be unique`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := spawnStack(t, c.edit)
			caller := callerOr(c.caller)
			before := writeCounts(t, s)
			res, err := s.CallAs(bus.Caller{SessionKey: caller, Sandboxed: c.sandboxed}, "sessions_spawn", c.params)
			if err != nil {
				t.Fatalf("thrown: %v", err)
			}
			if res["status"] != c.status || res["error"] != c.err {
				t.Fatalf("got %v\nwant status %s error %q", res, c.status, c.err)
			}
			sameCounts(t, before, writeCounts(t, s), "a refused spawn")
		})
	}
}

// allowModels configures an allowed model set (agents.defaults.models)
// that holds gpt-4.1 and the default model only.
func allowModels(c *config.Config) {
	c.Agents.Defaults.Model = "openai/gpt-4o-mini"
	c.Agents.Defaults.Models = map[string]config.ModelEntry{"openai/gpt-4.1": {Alias: "Big"}}
}

func callerOr(caller string) string {
	if caller == "" {
		return mainKey
	}
	return caller
}

func attachmentsParams(n int, content string) string {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"name":"f%d","content":%q}`, i, content))
	}
	return `{"task":"x","attachments":[` + strings.Join(items, ",") + `]}`
}

// runRequests reads every run request in SB_RUNS.
func runRequests(t *testing.T, s *handlerstest.Stack) []runqueue.Request {
	t.Helper()
	ctx := bustestCtx(t)
	st := s.Worker.Deps.Queue.Stream()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []runqueue.Request
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var r runqueue.Request
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestSpawnAccepted(t *testing.T) {
	s := spawnStack(t, func(c *config.Config) { c.Agents.Defaults.Subagents.RunTimeoutSeconds = 90 })
	res := s.MustCall(mainKey, "sessions_spawn", `{"task":"summarize the logs","label":"logs","model":"gpt-x","thinking":"High","cleanup":"delete"}`)
	child, _ := res["childSessionKey"].(string)
	runID, _ := res["runId"].(string)
	if res["status"] != "accepted" || !strings.HasPrefix(child, "agent:main:subagent:") || len(runID) != 36 || res["mode"] != "run" ||
		res["note"] != handlers.SubagentSpawnAcceptedNote || res["modelApplied"] != true {
		t.Fatalf("result %v", res)
	}
	d := s.Worker.Deps
	ctx := bustestCtx(t)
	rec, _, err := d.Subagents.Get(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	if rec.RunID != runID || rec.RequesterSessionKey != mainKey || rec.ControllerSessionKey != mainKey || rec.Depth != 1 ||
		rec.SubagentRole != "leaf" || rec.SubagentControlScope != "none" || rec.Cleanup != "delete" || rec.Model != "gpt-x" ||
		rec.Thinking != "high" || rec.RunTimeoutSeconds != 90 || rec.Label != "logs" || rec.Request == nil || rec.SpawnContext != "isolated" {
		t.Fatalf("registry record %+v", rec)
	}
	e, _, err := d.Store.Get(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	if e.SpawnedBy != mainKey || e.SpawnDepth == nil || *e.SpawnDepth != 1 || e.Rares().SubagentRole != "leaf" || e.Rares().SubagentControlScope != "none" ||
		e.Label != "logs" || e.Model != "gpt-x" || e.Rares().ThinkingLevel != "high" || e.SessionID != rec.ChildSessionID {
		t.Fatalf("child entry %+v", e)
	}
	rr, _, err := d.Runs.Get(ctx, runID)
	if err != nil || rr.Status != runs.Pending || rr.SessionKey != child {
		t.Fatalf("run record %+v %v", rr, err)
	}
	reqs := runRequests(t, s)
	if len(reqs) != 1 {
		t.Fatalf("%d run requests", len(reqs))
	}
	want := "[Subagent Context] You are running as a subagent (depth 1/1). Results auto-announce to your requester; do not busy-poll for status.\n\n[Subagent Task]: summarize the logs"
	r := reqs[0]
	if r.RunID != runID || r.SessionKey != child || r.Message != want || r.Prompt != want || r.Lane != "subagent" || r.TimeoutSeconds != 90 ||
		!r.Recorded || r.Provenance == nil || r.Provenance.SourceTool != "sessions_spawn" || r.Provenance.SourceSessionKey != mainKey ||
		!strings.Contains(r.ExtraSystemPrompt, "You are a leaf subagent (depth 1/1)") {
		t.Fatalf("run request %+v", r)
	}
}

func TestSpawnModesAndNotes(t *testing.T) {
	s := spawnStack(t, func(c *config.Config) { c.Agents.Defaults.Subagents.MaxChildrenPerAgent = 20 })
	cron := "agent:main:cron:nightly"
	if res := s.MustCall(cron, "sessions_spawn", `{"task":"x"}`); res["status"] != "accepted" || res["note"] != nil {
		t.Fatalf("a cron requester gets no note: %v", res)
	}
	s.Update(mainKey, func(e *sessions.Entry) {
		e.DeliveryContext = &sessions.DeliveryContext{Channel: "slack", To: "C1", ThreadID: "t9"}
	})
	res := s.MustCall(mainKey, "sessions_spawn", `{"task":"follow up","thread":true,"cleanup":"delete","context":"isolated"}`)
	if res["status"] != "accepted" || res["mode"] != "session" || res["note"] != "thread-bound session stays active after this task; continue in-thread for follow-ups." {
		t.Fatalf("session mode result %v", res)
	}
	ctx := bustestCtx(t)
	child := res["childSessionKey"].(string)
	rec, _, err := s.Worker.Deps.Subagents.Get(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Cleanup != "keep" || rec.SpawnMode != "session" || rec.RequesterOrigin == nil || rec.RequesterOrigin.ThreadID != "t9" {
		t.Fatalf("session mode forces keep and keeps the route: %+v", rec)
	}
	if !strings.Contains(rec.Request.Message, "\n\n[Subagent Context] This subagent session is persistent and remains available for thread follow-up messages.\n\n[Subagent Task]: follow up") {
		t.Fatalf("first message %q", rec.Request.Message)
	}
	e, _, _ := s.Worker.Deps.Store.Get(ctx, child)
	if e.DeliveryContext == nil || e.DeliveryContext.Channel != "slack" {
		t.Fatalf("a thread-bound child keeps the route: %+v", e)
	}
	// the legacy alias is read when alone; equal values are no conflict
	res = s.MustCall(mainKey, "sessions_spawn", `{"task":"x","timeoutSeconds":12.9,"run_timeout_seconds":12}`)
	rec, _, _ = s.Worker.Deps.Subagents.Get(ctx, res["childSessionKey"].(string))
	if rec.RunTimeoutSeconds != 12 || rec.Request.TimeoutSeconds != 12 {
		t.Fatalf("timeout %d", rec.RunTimeoutSeconds)
	}
}

func TestSpawnFanOutAndDepth(t *testing.T) {
	s := spawnStack(t, func(c *config.Config) {
		c.Agents.Defaults.Subagents.MaxSpawnDepth = 2
		c.Agents.Defaults.Subagents.MaxChildrenPerAgent = 2
	})
	var children []string
	for range 2 {
		res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x"}`)
		if res["status"] != "accepted" {
			t.Fatal(res)
		}
		children = append(children, res["childSessionKey"].(string))
	}
	res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x"}`)
	if res["status"] != "forbidden" || res["error"] != "sessions_spawn has reached max active children for this session (2/2)" {
		t.Fatalf("fan-out: %v", res)
	}
	// an ended child no longer counts
	ctx := bustestCtx(t)
	if _, err := s.Worker.Deps.Subagents.Update(ctx, children[0], func(r *subagents.Record) error { r.EndedAt = time.Now().UnixMilli(); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Worker.Deps.Children.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x"}`); res["status"] != "accepted" {
		t.Fatalf("after one ended: %v", res)
	}
	// depth 1 is an orchestrator under maxSpawnDepth 2; its child is a leaf at depth 2
	if err := s.Worker.Deps.Index.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	res = s.MustCall(children[1], "sessions_spawn", `{"task":"y"}`)
	if res["status"] != "accepted" {
		t.Fatalf("orchestrator spawn: %v", res)
	}
	grand, _, _ := s.Worker.Deps.Store.Get(ctx, res["childSessionKey"].(string))
	if *grand.SpawnDepth != 2 || grand.Rares().SubagentRole != "leaf" || grand.SpawnedBy != children[1] {
		t.Fatalf("grandchild %+v", grand)
	}
	if err := s.Worker.Deps.Index.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// the leaf may not spawn: the tool policy refuses it before the depth check
	_, err := s.Call(grand.Key, "sessions_spawn", `{"task":"z"}`)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeForbidden ||
		be.Message != "sessions_spawn is not available to leaf sub-agent sessions (tools.subagents leaf deny list: depth 2 of agents.defaults.subagents.maxSpawnDepth 2)" {
		t.Fatalf("leaf spawn: %v", err)
	}
	// with the tool allowed, the depth rule answers; the depth comes from spawnedBy when spawnDepth is absent
	s2 := spawnStack(t, func(c *config.Config) { c.Tools.Subagents.Tools.AlsoAllow = []string{"sessions_spawn"} })
	now := time.Now().UnixMilli()
	s2.Put(&sessions.Entry{Key: "agent:main:worker", SpawnedBy: mainKey, CreatedAt: now, UpdatedAt: now})
	if err := s2.Worker.Deps.Index.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	res = s2.MustCall("agent:main:worker", "sessions_spawn", `{"task":"z"}`)
	if res["error"] != "sessions_spawn is not allowed at this depth (current depth: 1, max: 1)" {
		t.Fatalf("depth from spawnedBy: %v", res)
	}
}

func TestSpawnAllowlistAndSandbox(t *testing.T) {
	s := spawnStack(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{
			{ID: "main", Subagents: &config.Subagents{AllowAgents: []string{"ops", "Ghost"}}},
			{ID: "ops", Sandbox: &config.Sandbox{Mode: "non-main"}},
			{ID: "free"},
		}
	})
	if res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x","agentId":"OPS"}`); res["status"] != "accepted" || !strings.HasPrefix(res["childSessionKey"].(string), "agent:ops:subagent:") {
		t.Fatalf("allowed agent: %v", res)
	}
	if res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x","agentId":"ghost"}`); res["status"] != "accepted" {
		t.Fatalf("an allowlisted id need not be configured: %v", res)
	}
	if res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x","agentId":"free"}`); res["error"] != "agentId is not allowed for sessions_spawn (allowed: ops, ghost)" {
		t.Fatalf("not allowlisted: %v", res)
	}
	// a sandboxed requester may spawn into a sandboxed agent; require needs one
	if res, _ := s.CallAs(bus.Caller{SessionKey: mainKey, Sandboxed: true}, "sessions_spawn", `{"task":"x","agentId":"ops","sandbox":"require"}`); res["status"] != "accepted" {
		t.Fatalf("sandboxed target: %v", res)
	}
}

func TestSpawnIdempotentRetry(t *testing.T) {
	s := spawnStack(t, nil)
	first := s.MustCall(mainKey, "sessions_spawn", `{"task":"x","idempotencyKey":"job-1"}`)
	if first["status"] != "accepted" {
		t.Fatal(first)
	}
	before := writeCounts(t, s)
	again := s.MustCall(mainKey, "sessions_spawn", `{"task":"x","idempotencyKey":"job-1"}`)
	if again["childSessionKey"] != first["childSessionKey"] || again["runId"] != first["runId"] || again["status"] != "accepted" {
		t.Fatalf("retry %v, first %v", again, first)
	}
	sameCounts(t, before, writeCounts(t, s), "an idempotent retry")
	other := s.MustCall(mainKey, "sessions_spawn", `{"task":"x","idempotencyKey":"job-2"}`)
	if other["childSessionKey"] == first["childSessionKey"] {
		t.Fatal("another key must spawn another child")
	}
	// another caller's same key is another child
	peer := s.MustCall("agent:main:peer", "sessions_spawn", `{"task":"x","idempotencyKey":"job-1"}`)
	if peer["childSessionKey"] == first["childSessionKey"] {
		t.Fatal("ids derive from (caller, key)")
	}
}

func TestSpawnAttachmentsAndFork(t *testing.T) {
	s := spawnStack(t, nil)
	s.Import(importer.ImportOptions{SessionKey: mainKey},
		`{"role":"user","content":"earlier question"}`,
		`{"role":"assistant","content":"earlier answer","__sessionbus":{"run":"r0","part":"reply"}}`)
	bin := []byte{0, 1, 2, 250}
	b64 := base64.StdEncoding.EncodeToString(bin)
	res := s.MustCall(mainKey, "sessions_spawn", `{"task":"use the files","context":"fork","attachments":[{"name":"notes.md","content":"hello","mimeType":"text/markdown"},{"name":"blob.bin","content":"`+b64+`","encoding":"base64"}]}`)
	if res["status"] != "accepted" {
		t.Fatal(res)
	}
	child := res["childSessionKey"].(string)
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	att := res["attachments"].(map[string]any)
	files := att["files"].([]any)
	if att["count"] != float64(2) || att["totalBytes"] != float64(9) || att["relDir"] != ".openclaw/attachments/"+strings.TrimPrefix(child, "agent:main:subagent:") ||
		files[0].(map[string]any)["sha256"] != sum([]byte("hello")) || files[1].(map[string]any)["sha256"] != sum(bin) || files[1].(map[string]any)["bytes"] != float64(4) {
		t.Fatalf("attachments %v", att)
	}
	entries, err := s.Worker.Deps.Transcripts.Read(bustestCtx(t), bus.EncodeKey(child), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Fatalf("child transcript has %d entries, want 2 forked + 2 attachments", len(entries))
	}
	if !strings.Contains(string(entries[0].Data), "earlier question") || !strings.Contains(string(entries[1].Data), "earlier answer") ||
		strings.Contains(string(entries[1].Data), "__sessionbus") {
		t.Fatalf("fork copy: %s / %s", entries[0].Data, entries[1].Data)
	}
	if !strings.Contains(string(entries[2].Data), "[Subagent Attachment] .openclaw/attachments/") || !strings.Contains(string(entries[3].Data), b64) {
		t.Fatalf("attachment entries: %s / %s", entries[2].Data, entries[3].Data)
	}
	// isolated (the default) starts clean
	res = s.MustCall(mainKey, "sessions_spawn", `{"task":"x"}`)
	n, err := s.Worker.Deps.Transcripts.Count(bustestCtx(t), bus.EncodeKey(res["childSessionKey"].(string)))
	if err != nil || n != 0 {
		t.Fatalf("isolated child transcript: %d %v", n, err)
	}
}

func TestSubagentToolPolicy(t *testing.T) {
	s := spawnStack(t, func(c *config.Config) { c.Tools.Subagents.Tools.Deny = []string{"sessions_y*"} })
	res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x"}`)
	child := res["childSessionKey"].(string)
	if err := s.Worker.Deps.Index.Sync(bustestCtx(t)); err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]string{
		"sessions_send":    "sessions_send is not available to sub-agent sessions (tools.subagents deny list)",
		"agents_list":      "agents_list is not available to sub-agent sessions (tools.subagents deny list)",
		"sessions_list":    "sessions_list is not available to leaf sub-agent sessions (tools.subagents leaf deny list: depth 1 of agents.defaults.subagents.maxSpawnDepth 1)",
		"sessions_history": "sessions_history is not available to leaf sub-agent sessions (tools.subagents leaf deny list: depth 1 of agents.defaults.subagents.maxSpawnDepth 1)",
	} {
		_, err := s.Call(child, tool, `{}`)
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != bus.CodeForbidden || be.Message != want {
			t.Errorf("%s: %v, want 403 %q", tool, err, want)
		}
	}
	// a key with :subagent: is a sub-agent even without an entry
	if _, err := s.Call("agent:main:subagent:nobody", "sessions_send", `{"message":"x","sessionKey":"main"}`); err == nil || !strings.Contains(err.Error(), "tools.subagents deny list") {
		t.Fatalf("keyless sub-agent: %v", err)
	}
	// top-level sessions are not restricted
	if _, err := s.Call(mainKey, "agents_list", `{}`); err != nil {
		t.Fatal(err)
	}
}

func TestAgentsList(t *testing.T) {
	s := spawnStack(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{
			{ID: "main", Name: "Main", Subagents: &config.Subagents{AllowAgents: []string{"zeta", "Beta", "alpha_2", "alpha-2", "unlisted"}}},
			{ID: "beta", Name: "Beta bot"}, {ID: "zeta"}, {ID: "alpha-2"}, {ID: "alpha_2"}, {ID: "other"},
		}
	})
	res := s.MustCall(mainKey, "agents_list", `{}`)
	got, _ := json.Marshal(res)
	want := `{"agents":[{"configured":true,"id":"main","name":"Main"},{"configured":true,"id":"alpha_2"},{"configured":true,"id":"alpha-2"},{"configured":true,"id":"beta","name":"Beta bot"},{"configured":false,"id":"unlisted"},{"configured":true,"id":"zeta"}],"allowAny":false,"requester":"main"}`
	if string(got) != want {
		t.Fatalf("agents_list\n got %s\nwant %s", got, want)
	}
	s2 := spawnStack(t, func(c *config.Config) {
		c.Agents.Defaults.Subagents.AllowAgents = []string{"*"}
		c.Agents.List = []config.Agent{{ID: "ops"}, {ID: "main"}}
	})
	res = s2.MustCall(mainKey, "agents_list", `{}`)
	got, _ = json.Marshal(res)
	if want := `{"agents":[{"configured":true,"id":"main"},{"configured":true,"id":"ops"}],"allowAny":true,"requester":"main"}`; string(got) != want {
		t.Fatalf("allowAny\n got %s\nwant %s", got, want)
	}
}
