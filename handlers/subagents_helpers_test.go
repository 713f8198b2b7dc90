package handlers_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/transcripts/transcriptstest"
)

// child describes a sub-agent the tests create with the writes a spawn
// makes (contract step 1: the registry record carrying the run request,
// the child's session entry, the queued run with its pending record),
// until sessions_spawn exists to make them.
type child struct {
	parent  string // requester = controller
	key     string // default agent:main:subagent:<n>
	label   string
	task    string
	message string // the run's message (default: the task)
	runID   string // default: a fresh id
	depth   int    // default 1
	created int64  // default now; also the start time when started
	started bool   // StartedAt set (the run began)
	noQueue bool   // registry record only: a spawn that crashed before queueing
}

var childSeq atomic.Int64

// spawn performs the spawn writes for c and waits until the worker's
// indexes have them.
func spawn(t *testing.T, s *handlerstest.Stack, c child) *subagents.Record {
	t.Helper()
	ctx := bustest.Context(t)
	d := s.Worker.Deps
	n := childSeq.Add(1)
	if c.key == "" {
		c.key = fmt.Sprintf("agent:main:subagent:c%d", n)
	}
	if c.runID == "" {
		c.runID = sessions.NewID()
	}
	if c.depth == 0 {
		c.depth = 1
	}
	if c.task == "" {
		c.task = "task " + c.key
	}
	if c.message == "" {
		c.message = c.task
	}
	now := time.Now().UnixMilli()
	if c.created == 0 {
		c.created = now + n // distinct, ordered by creation
	}
	agent := rules.AgentIDFromKey(c.key)
	req := &runqueue.Request{
		RunID: c.runID, SessionKey: c.key, AgentID: agent,
		Message: c.message, Prompt: "[Subagent Task]: " + c.message,
		Lane: "subagent", ChainID: c.runID, CreatedAt: c.created,
	}
	rec := &subagents.Record{
		RunID: c.runID, ChildSessionKey: c.key, ChildAgentID: agent,
		ControllerSessionKey: c.parent, RequesterSessionKey: c.parent,
		Task: c.task, Label: c.label, Cleanup: "keep", SpawnMode: "run", Runtime: "subagent",
		Depth: c.depth, CreatedAt: c.created, Request: req, ExpectsCompletion: true,
	}
	if c.started {
		rec.StartedAt = c.created
	}
	rev, err := d.Subagents.Create(ctx, rec)
	if err != nil {
		t.Fatalf("register %s: %v", c.key, err)
	}
	depth := c.depth
	role, scope := "leaf", "none"
	if depth < s.Config.Agents.Defaults.Subagents.MaxSpawnDepth {
		role, scope = "orchestrator", "children"
	}
	if _, err := d.Store.Create(ctx, &sessions.Entry{
		Key: c.key, AgentID: agent, SessionID: sessions.NewID(), CreatedAt: c.created, UpdatedAt: c.created,
		Label: c.label, SpawnedBy: c.parent, SpawnDepth: &depth, Rare: &sessions.RareFields{SubagentRole: role, SubagentControlScope: scope},
	}); err != nil {
		t.Fatalf("child entry %s: %v", c.key, err)
	}
	if !c.noQueue {
		run := &runs.Record{RunID: c.runID, SessionKey: c.key, AgentID: agent, Status: runs.Pending, CreatedAt: c.created, ChainID: c.runID}
		if err := submit.Run(ctx, d.Queue, d.Runs, req, run); err != nil {
			t.Fatalf("queue %s: %v", c.key, err)
		}
	}
	if err := d.Children.WaitApplied(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if err := d.Index.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return rec
}

// finish ends a child's run as a gateway would (contract step 4): the run
// record turns terminal with outcome, and the registry record is
// finalized at endedAt with the given announce state (nil: none yet).
func finish(t *testing.T, s *handlerstest.Stack, key, outcome string, endedAt time.Time, announce *subagents.Announce) {
	t.Helper()
	ctx := bustest.Context(t)
	d := s.Worker.Deps
	rec, _, err := d.Subagents.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Runs.Update(ctx, rec.RunID, func(r *runs.Record) error {
		r.Status, r.EndedAt = outcome, endedAt.UnixMilli()
		return nil
	}); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatal(err)
	}
	updateChild(t, s, key, func(r *subagents.Record) {
		r.EndedAt, r.Outcome, r.Announce = endedAt.UnixMilli(), outcome, announce
		if r.StartedAt == 0 {
			r.StartedAt = min(r.CreatedAt, r.EndedAt)
		}
	})
}

// updateChild edits a registry record and waits for the worker's index.
func updateChild(t *testing.T, s *handlerstest.Stack, key string, fn func(*subagents.Record)) {
	t.Helper()
	ctx := bustest.Context(t)
	d := s.Worker.Deps
	if _, err := d.Subagents.Update(ctx, key, func(r *subagents.Record) error { fn(r); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := d.Children.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

func delivered() *subagents.Announce {
	return &subagents.Announce{State: subagents.AnnounceDelivered}
}

// runStatus reads a run record's status ("" when it has none).
func runStatus(t *testing.T, s *handlerstest.Stack, runID string) string {
	t.Helper()
	rec, _, err := s.Worker.Deps.Runs.Get(bustest.Context(t), runID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec.Status
}

// subagentsStack is a stack whose main agent runs the script rules, for the
// tests that start a gateway; edit may adjust the config further.
func subagentsStack(t *testing.T, edit func(*config.Config)) *handlerstest.Stack {
	return handlerstest.Start(t, func(c *config.Config) {
		c.Agents.List = []config.Agent{{
			ID: "main", Runtime: "script",
			Script: map[string]any{"rules": []any{
				map[string]any{"match": "^slow", "delayMs": 120_000, "reply": "too late"},
				map[string]any{"match": "^yield$", "yield": "waiting for children"},
				map[string]any{"match": "^toolyield$", "tool": map[string]any{"name": "sessions_yield"}},
				map[string]any{"match": "^quick", "reply": "done: {{message}}"},
			}},
		}}
		if edit != nil {
			edit(c)
		}
	})
}

// startGateway runs a gateway replica against the stack's server.
func startGateway(t *testing.T, s *handlerstest.Stack) *gateway.Gateway {
	t.Helper()
	nc, _ := bustest.Connect(t, s.Server)
	return gatewaytest.Start(t, s, nc, "gw-"+strings.ReplaceAll(t.Name(), "/", "-"), nil, gateway.Options{})
}

// submitRun queues one run in a session, as a sender would.
func submitRun(t *testing.T, s *handlerstest.Stack, session, message string, edit func(*runqueue.Request)) string {
	t.Helper()
	d := s.Worker.Deps
	id := sessions.NewID()
	now := time.Now().UnixMilli()
	req := &runqueue.Request{RunID: id, SessionKey: session, AgentID: rules.AgentIDFromKey(session),
		Message: message, Prompt: message, ChainID: id, CreatedAt: now}
	if edit != nil {
		edit(req)
	}
	rec := &runs.Record{RunID: id, SessionKey: session, AgentID: req.AgentID, Status: runs.Pending, CreatedAt: now, ChainID: id}
	if err := submit.Run(bustest.Context(t), d.Queue, d.Runs, req, rec); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitRun waits for a run to end and returns its record.
func waitRun(t *testing.T, s *handlerstest.Stack, runID string) *runs.Record {
	t.Helper()
	return runstest.WaitRun(t, s.Worker.Deps.Runs, runID, 30*time.Second)
}

// transcript returns a session's messages as (role, content) pairs.
func transcript(t *testing.T, s *handlerstest.Stack, session string) [][2]string {
	t.Helper()
	type message struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	var out [][2]string
	for _, m := range transcriptstest.Transcript[message](t, s.Worker.Deps.Transcripts, session, 100) {
		text, _ := m.Content.(string)
		out = append(out, [2]string{m.Role, text})
	}
	return out
}
