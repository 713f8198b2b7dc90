package gateway

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// nested spawns an orchestrator child of agent:req:main and its own child,
// and waits until the grandchild's first run seeded the orchestrator's
// cursor and its completion announce ran in the orchestrator.
func (e *childEnv) nested() (orch, grand string, seed uint64) {
	e.t.Helper()
	o := e.spawn(spawns.Child{Task: "orchestrate"})
	e.waitChild(o.ChildSessionKey, "orchestrator announced", announced)
	gc := e.spawn(spawns.Child{Requester: o.ChildSessionKey, Task: "leaf work"})
	e.waitChild(gc.ChildSessionKey, "grandchild announced", announced)
	c, err := e.g.watchers.Get(bustest.Context(e.t), o.ChildSessionKey, gc.ChildSessionKey)
	if err != nil || c.Provenance != watchers.Implicit || c.Pending() {
		e.t.Fatalf("orchestrator's cursor %+v %v", c, err)
	}
	return o.ChildSessionKey, gc.ChildSessionKey, c.LastSeenSequence
}

// human records a human turn into session as the ingress does, with its
// parent as producer-supplied watcher.
func (e *childEnv) human(session, parent string) signals.Event {
	e.t.Helper()
	ev, err := e.g.recorder.Record(bustest.Context(e.t), signals.Event{
		DedupeKey: fmt.Sprintf("human-message:%d", time.Now().UnixNano()), SessionKey: session,
		Kind: signals.KindHumanDirectMessage, ActorType: signals.ActorHuman, ActorID: "user42",
		OccurredAt: time.Now().UnixMilli(), Summary: "human message via telegram", Payload: map[string]any{"channel": "telegram"},
	}, parent)
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

func (e *childEnv) cursor(watcher, target string) *watchers.Cursor {
	e.t.Helper()
	c, err := e.g.watchers.Get(bustest.Context(e.t), watcher, target)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (g *Gateway) pendingFor(watcher string) []notices.Body {
	g.pending.mu.Lock()
	defer g.pending.mu.Unlock()
	var out []notices.Body
	for _, b := range g.pending.m[watcher] {
		out = append(out, b)
	}
	return out
}

// TestSubagentWatcherToldOnNextTurn: a human turn into a grandchild is not
// a reason to wake its orchestrator (a sub-agent): the notice waits, and
// the orchestrator's next turn starts with it; that turn acknowledges it,
// and the turn after starts without it.
func TestSubagentWatcherToldOnNextTurn(t *testing.T) {
	e := newChildEnv(t)
	orch, grand, seed := e.nested()

	ev := e.human(grand, orch)
	n := watchers.Notice{Watcher: orch, Target: grand, LastSeenSequence: seed}
	bustest.WaitFor(t, 20*time.Second, "the notice held for the orchestrator's next turn", func() bool {
		return len(e.g.pendingFor(orch)) == 1
	})
	if _, _, err := e.runs.Get(bustest.Context(t), notices.ID(n)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a sub-agent watcher was woken: %v", err)
	}
	if c := e.cursor(orch, grand); c.LastSeenSequence != seed || c.NotifiedSequence != ev.Sequence {
		t.Fatalf("cursor %+v, want a notice pending since %d", c, seed)
	}

	req := e.request(orch, "kid", "next step")
	e.submit(req)
	if rec := e.wait(req.RunID); rec.Status != runs.OK {
		t.Fatalf("orchestrator's turn %+v", rec)
	}
	tr := e.transcript(orch)
	want := "System: " + `Session "` + grand + `" changed (other actor). Reconcile before acting: session_status sessionKey "` + grand +
		`" changesSince ` + fmt.Sprint(seed) + ".\n\nnext step"
	if p := tr[len(tr)-2]; p["role"] != "user" || p["content"] != want {
		t.Fatalf("the orchestrator's next prompt:\n%v\nwant\n%s", p["content"], want)
	}
	if c := e.cursor(orch, grand); c.Pending() || c.LastSeenSequence != ev.Sequence || c.MaterialSequence != ev.Sequence {
		t.Fatalf("not acknowledged: %+v", c)
	}

	req = e.request(orch, "kid", "step after")
	e.submit(req)
	e.wait(req.RunID)
	tr = e.transcript(orch)
	if p := tr[len(tr)-2]; p["content"] != "step after" {
		t.Fatalf("a drained notice told again: %v", p["content"])
	}
}

// TestSubagentWatcherWokenWhenConfigured: with
// session.notices.wakeSubagents the orchestrator is woken like a main
// session: one run whose prompt is the notice, then acknowledged.
func TestSubagentWatcherWokenWhenConfigured(t *testing.T) {
	base := newEnv(t)
	base.cfg.Bus.SubagentSweepInterval = 200 * time.Millisecond
	base.cfg.Session.Notices.WakeSubagents = true
	g := base.gateway("gw1", Options{})
	e := &childEnv{env: base, g: g, stores: spawns.Stores{Registry: g.reg, Sessions: g.store, Queue: base.queue, Runs: base.runs}}
	orch, grand, seed := e.nested()

	ev := e.human(grand, orch)
	n := watchers.Notice{Watcher: orch, Target: grand, LastSeenSequence: seed}
	if rec := e.wait(notices.ID(n)); rec.Status != runs.OK {
		t.Fatalf("notice run %+v", rec)
	}
	bustest.WaitFor(t, 20*time.Second, "the notice acknowledged", func() bool {
		c := e.cursor(orch, grand)
		return !c.Pending() && c.LastSeenSequence == ev.Sequence
	})
	found := 0
	for _, m := range e.transcript(orch) {
		if m["role"] == "user" && m["content"] == n.Text() {
			found++
		}
	}
	if found != 1 || len(g.pendingFor(orch)) != 0 {
		t.Fatalf("notice prompts in the orchestrator: %d (pending %v)", found, g.pendingFor(orch))
	}
}

// TestNoticeSelfSuppressed: a notify-eligible change made by the watcher
// itself neither notifies it nor raises its material watermark; the same
// change by another agent does.
func TestNoticeSelfSuppressed(t *testing.T) {
	e := newChildEnv(t)
	orch, grand, seed := e.nested()
	ctx := bustest.Context(t)
	goal := func(actor string) {
		if _, err := e.g.recorder.Record(ctx, signals.Event{
			DedupeKey: fmt.Sprintf("goal:%d", time.Now().UnixNano()), SessionKey: grand, Kind: signals.KindGoalChanged,
			ActorType: signals.ActorAgent, ActorID: actor, OccurredAt: time.Now().UnixMilli(), Summary: "goal updated",
		}); err != nil {
			t.Fatal(err)
		}
	}
	goal(orch)
	if c := e.cursor(orch, grand); c.Pending() || c.MaterialSequence != seed {
		t.Fatalf("the watcher's own change marked it: %+v", c)
	}
	goal("agent:kid:other")
	if c := e.cursor(orch, grand); !c.Pending() || c.LastSeenSequence != seed {
		t.Fatalf("another agent's change did not notify: %+v", c)
	}
	// a duplicate (same dedupe key) opens nothing
	ev := signals.Event{DedupeKey: "goal:dup", SessionKey: grand, Kind: signals.KindGoalChanged, ActorType: signals.ActorAgent, ActorID: "agent:kid:other", OccurredAt: time.Now().UnixMilli(), Summary: "goal updated"}
	first, err := e.g.recorder.Record(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	before := e.cursor(orch, grand)
	again, err := e.g.recorder.Record(context.Background(), ev)
	if err != nil || again.Sequence != first.Sequence {
		t.Fatalf("duplicate appended: %d vs %d (%v)", again.Sequence, first.Sequence, err)
	}
	if c := e.cursor(orch, grand); c.MaterialSequence != before.MaterialSequence || c.NotifiedSequence != before.NotifiedSequence {
		t.Fatalf("a duplicate moved the cursor: %+v -> %+v", before, c)
	}
}
