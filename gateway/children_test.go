package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/gateway/completion"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

// childEnv is a gateway with a fast sweep and the stores a spawn writes.
type childEnv struct {
	*env
	g      *Gateway
	stores spawns.Stores
}

func newChildEnv(t *testing.T) *childEnv {
	e := newEnv(t)
	e.cfg.Bus.SubagentSweepInterval = 200 * time.Millisecond
	g := e.gateway("gw1", Options{})
	return &childEnv{env: e, g: g, stores: spawns.Stores{Registry: g.reg, Sessions: g.store, Queue: e.queue, Runs: e.runs}}
}

func (e *childEnv) spawn(c spawns.Child) *subagents.Record {
	e.t.Helper()
	if c.Agent == "" {
		c.Agent = "kid"
	}
	if c.Requester == "" {
		c.Requester = "agent:req:main"
	}
	rec, err := spawns.Spawn(bustest.Context(e.t), e.stores, c)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// waitChild waits until the child's registry record satisfies ok.
func (e *childEnv) waitChild(key, what string, ok func(*subagents.Record) bool) *subagents.Record {
	e.t.Helper()
	var last *subagents.Record
	bustest.WaitFor(e.t, 20*time.Second, what, func() bool {
		r, _, err := e.g.reg.Get(context.Background(), key)
		last = r
		return err == nil && ok(r)
	})
	return last
}

func announced(r *subagents.Record) bool {
	return r.Announce != nil && r.Announce.State == subagents.AnnounceDelivered
}

// announces returns the announce prompts in session's transcript.
func (e *childEnv) announces(session string) []map[string]any {
	var out []map[string]any
	for _, m := range e.transcript(session) {
		if p, _ := m["provenance"].(map[string]any); p != nil && p["kind"] == "internal_system" && m["role"] == "user" {
			out = append(out, m)
		}
	}
	return out
}

func TestChildAnnounceDelivered(t *testing.T) {
	e := newChildEnv(t)
	c := e.spawn(spawns.Child{Task: "count the files", Label: "counter"})
	r := e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	if r.Outcome != subagents.OutcomeOK || r.StartedAt == 0 || r.EndedAt < r.StartedAt || !r.Queued || r.DeadlineAt != 0 {
		t.Fatalf("registry record %+v", r)
	}
	if r.Announce.DeliveryRun != AnnounceRunID(c.RunID) || r.Announce.TargetKey != "agent:req:main" || r.Announce.Gateway != "gw1" {
		t.Fatalf("announce %+v", r.Announce)
	}
	want := completion.Text(&completion.Event{
		ChildSessionKey: c.ChildSessionKey, ChildSessionID: c.ChildSessionID, Label: "counter", Task: "count the files",
		Outcome: "ok", Result: "kid did: [Subagent Task]: count the files", StartedAt: r.StartedAt, EndedAt: r.EndedAt,
		TranscriptPath:    "SB_TRANSCRIPTS/sb.tr." + bus.EncodeKey(c.ChildSessionKey),
		ExpectsCompletion: true,
	})
	bustest.WaitFor(t, 20*time.Second, "the requester's reply", func() bool { return len(e.transcript("agent:req:main")) == 2 })
	tr := e.transcript("agent:req:main")
	if tr[0]["content"] != want || tr[0]["role"] != "user" {
		t.Fatalf("announce prompt:\n%v\nwant\n%s", tr[0]["content"], want)
	}
	if p := tr[0]["provenance"].(map[string]any); p["sourceSessionKey"] != c.ChildSessionKey {
		t.Fatalf("provenance %v", p)
	}
	if !strings.HasPrefix(tr[1]["content"].(string), "req says: <<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>") {
		t.Fatalf("requester reply %v", tr[1]["content"])
	}
	if rec := e.wait(AnnounceRunID(c.RunID)); rec.Status != runs.OK {
		t.Fatalf("announce run %+v", rec)
	}
	// no route stored, none given: nothing delivered anywhere
	if d, _ := e.lastDelivery(">"); d != nil {
		t.Fatalf("unexpected delivery %+v", d)
	}
}

func TestChildAnnounceReplyGoesToRequesterRoute(t *testing.T) {
	e := newChildEnv(t)
	ctx := bustest.Context(t)
	now := time.Now().UnixMilli()
	if _, err := e.g.store.Create(ctx, &sessions.Entry{
		Key: "agent:req:main", AgentID: "req", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now,
		LastChannel: "telegram", LastTo: "user:42", Rare: &sessions.RareFields{LastThreadID: "7"},
	}); err != nil {
		t.Fatal(err)
	}
	c := e.spawn(spawns.Child{Task: "route me"})
	e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	e.wait(AnnounceRunID(c.RunID))
	var got string
	bustest.WaitFor(t, 10*time.Second, "delivery on telegram", func() bool {
		d, _ := e.lastDelivery("telegram")
		if d == nil {
			return false
		}
		if d.To != "user:42" || d.ThreadID != "7" || d.SessionKey != "agent:req:main" || d.RunID != AnnounceRunID(c.RunID) {
			t.Fatalf("delivery %+v", d)
		}
		got = d.Message
		return true
	})
	if !strings.HasPrefix(got, "req says: ") {
		t.Fatalf("delivered %q", got)
	}
}

func TestChildAnnounceSkipPostsNothing(t *testing.T) {
	e := newChildEnv(t)
	c := e.spawn(spawns.Child{Task: "skip this", Cleanup: "delete"})
	r := e.waitChild(c.ChildSessionKey, "announce skipped and child deleted", func(r *subagents.Record) bool {
		return r.Announce != nil && r.Announce.State == subagents.AnnounceSkipped && r.Deleted
	})
	if r.Outcome != subagents.OutcomeOK {
		t.Fatalf("record %+v", r)
	}
	if _, _, err := e.runs.Get(context.Background(), AnnounceRunID(c.RunID)); err == nil {
		t.Fatal("a silent child's announce was queued")
	}
	if n := len(e.announces("agent:req:main")); n != 0 {
		t.Fatalf("%d announces in the requester", n)
	}
	if _, _, err := e.g.store.Get(context.Background(), c.ChildSessionKey); err == nil {
		t.Fatal("cleanup delete left the child's session entry")
	}
}

func TestChildRunTimeoutCancelsTurnAndAnnounces(t *testing.T) {
	e := newChildEnv(t)
	c := e.spawn(spawns.Child{Task: "slow work", TimeoutSeconds: 1})
	r := e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	if r.Outcome != subagents.OutcomeTimeout || r.DeadlineAt != r.StartedAt+1000 {
		t.Fatalf("record %+v", r)
	}
	rec := e.wait(c.RunID)
	if rec.Status != runs.Timeout {
		t.Fatalf("run %+v", rec)
	}
	bustest.WaitFor(t, 10*time.Second, "the announce prompt", func() bool { return len(e.announces("agent:req:main")) == 1 })
	if got := e.announces("agent:req:main")[0]["content"].(string); !strings.Contains(got, "\nstatus: timed out\n") ||
		!strings.Contains(got, "\n(no output)\n") {
		t.Fatalf("announce %s", got)
	}
	for _, m := range e.transcript(c.ChildSessionKey) {
		if m["role"] == "assistant" {
			t.Fatalf("timed-out child replied: %v", m)
		}
	}
}

func TestChildKilledRunCancelsTurnAndAnnounces(t *testing.T) {
	e := newChildEnv(t)
	c := e.spawn(spawns.Child{Task: "slow job"})
	e.waitChild(c.ChildSessionKey, "started", func(r *subagents.Record) bool { return r.StartedAt != 0 })
	ctx := bustest.Context(t)
	bustest.WaitFor(t, 10*time.Second, "running", func() bool {
		rec, _, err := e.runs.Get(ctx, c.RunID)
		return err == nil && rec.Status == runs.Running
	})
	if _, err := e.runs.Update(ctx, c.RunID, func(r *runs.Record) error {
		r.Status, r.Error, r.EndedAt = runs.Killed, "killed by test", time.Now().UnixMilli()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	if r.Outcome != subagents.OutcomeKilled {
		t.Fatalf("record %+v", r)
	}
	// the turn was cancelled long before the script's 30 s: the message is acked
	waitQueueDrained(t, e.g)
	if rec := e.wait(c.RunID); rec.Status != runs.Killed {
		t.Fatalf("run %+v", rec)
	}
	bustest.WaitFor(t, 10*time.Second, "the announce prompt", func() bool { return len(e.announces("agent:req:main")) == 1 })
	if got := e.announces("agent:req:main")[0]["content"].(string); !strings.Contains(got, "\nstatus: failed: killed by test\n") {
		t.Fatalf("announce %s", got)
	}
}

func TestHalfDoneSpawnCompletedBySweep(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	e := newChildEnv(t)
	c := e.spawn(spawns.Child{Task: "orphaned", SkipQueue: true})
	r := e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	if r.Outcome != subagents.OutcomeOK {
		t.Fatalf("record %+v", r)
	}
	ent, _, err := e.g.store.Get(context.Background(), c.ChildSessionKey)
	if err != nil || ent.SpawnedBy != "agent:req:main" || ent.SessionID != c.ChildSessionID {
		t.Fatalf("child entry %+v, %v", ent, err)
	}
}

func TestRunTakenAfterDeadlineEndsAsTimeout(t *testing.T) {
	e := newChildEnv(t)
	ctx := bustest.Context(t)
	c := e.spawn(spawns.Child{Task: "late", TimeoutSeconds: 5, SkipQueue: true})
	// started once, long ago (its first gateway died): the deadline passed
	past := time.Now().Add(-time.Minute).UnixMilli()
	if _, err := e.g.reg.Update(ctx, c.ChildSessionKey, func(r *subagents.Record) error {
		r.StartedAt, r.DeadlineAt, r.Queued = past, past+5000, true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	req := *c.Request
	e.submit(&req)
	if rec := e.wait(c.RunID); rec.Status != runs.Timeout || rec.Error != "run timed out after 5s" {
		t.Fatalf("run %+v", rec)
	}
	r := e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	if r.Outcome != subagents.OutcomeTimeout || r.DeadlineAt != past+5000 {
		t.Fatalf("record %+v", r)
	}
	for _, m := range e.transcript(c.ChildSessionKey) {
		if m["role"] == "assistant" {
			t.Fatalf("a run past its deadline ran: %v", m)
		}
	}
}

func TestGoneNestedRequesterFallsBack(t *testing.T) {
	e := newChildEnv(t)
	ctx := bustest.Context(t)
	// an orchestrator child of agent:req:main, whose session is gone
	orch := e.spawn(spawns.Child{Task: "orchestrate", Cleanup: "delete"})
	e.waitChild(orch.ChildSessionKey, "orchestrator deleted", func(r *subagents.Record) bool { return r.Deleted })
	c := e.spawn(spawns.Child{Task: "grandchild", Requester: orch.ChildSessionKey})
	r := e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	if r.Announce.TargetKey != "agent:req:main" {
		t.Fatalf("announce went to %q", r.Announce.TargetKey)
	}
	bustest.WaitFor(t, 10*time.Second, "both announces in the top-level requester", func() bool {
		return len(e.announces("agent:req:main")) == 2
	})
	got := e.announces("agent:req:main")[1]["content"].(string)
	if !strings.Contains(got, "session_key: "+c.ChildSessionKey+"\n") || !strings.Contains(got, "A completed subagent task is ready for user delivery.") {
		t.Fatalf("fallback announce %s", got)
	}
	if _, _, err := e.g.store.Get(ctx, orch.ChildSessionKey); err == nil {
		t.Fatal("orchestrator still has its entry")
	}
}

func TestNestedRequesterGetsInternalInstruction(t *testing.T) {
	e := newChildEnv(t)
	orch := e.spawn(spawns.Child{Task: "orchestrate"})
	e.waitChild(orch.ChildSessionKey, "orchestrator announced", announced)
	c := e.spawn(spawns.Child{Task: "leaf work", Requester: orch.ChildSessionKey})
	r := e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	if r.Announce.TargetKey != orch.ChildSessionKey {
		t.Fatalf("announce went to %q", r.Announce.TargetKey)
	}
	bustest.WaitFor(t, 10*time.Second, "the announce in the orchestrator", func() bool { return len(e.announces(orch.ChildSessionKey)) == 1 })
	got := e.announces(orch.ChildSessionKey)[0]["content"].(string)
	if !strings.Contains(got, "Action:\nConvert this completion into a concise internal orchestration update") {
		t.Fatalf("nested announce %s", got)
	}
}

func TestAnnounceClaimedOnceAcrossGateways(t *testing.T) {
	e := newChildEnv(t)
	e.gateway("gw2", Options{})
	e.gateway("gw3", Options{})
	var kids []*subagents.Record
	for i := range 12 {
		kids = append(kids, e.spawn(spawns.Child{Task: "job " + string(rune('a'+i))}))
	}
	for _, c := range kids {
		e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	}
	bustest.WaitFor(t, 20*time.Second, "12 announces", func() bool { return len(e.announces("agent:req:main")) >= 12 })
	seen := map[string]int{}
	for _, m := range e.announces("agent:req:main") {
		for _, c := range kids {
			if strings.Contains(m["content"].(string), "session_key: "+c.ChildSessionKey+"\n") {
				seen[c.ChildSessionKey]++
			}
		}
	}
	for _, c := range kids {
		if seen[c.ChildSessionKey] != 1 {
			t.Fatalf("child %s announced %d times", c.ChildSessionKey, seen[c.ChildSessionKey])
		}
	}
	cl, err := e.g.claims.Get(context.Background(), announceClaim(kids[0].RunID, 0))
	if err != nil || !cl.Done {
		t.Fatalf("claim %+v, %v", cl, err)
	}
}

// A carrying run that ended before it started (its record terminal, with
// no transcript position) is never run again: the announce goes out on the
// next carrier, once, instead of waiting as "queued" for a run that will
// never carry it.
func TestAnnounceCarrierEndedUnstartedTriesTheNext(t *testing.T) {
	e := newChildEnv(t)
	ctx := bustest.Context(t)
	c := e.spawn(spawns.Child{Task: "job", SkipQueue: true}) // the sweep completes the spawn after its grace
	if err := e.runs.Create(ctx, &runs.Record{
		RunID: AnnounceRunID(c.RunID), SessionKey: "agent:req:main", AgentID: "req", Status: runs.Error,
		Error: "the gateway gave up on this run after 5 failed attempts", CreatedAt: time.Now().UnixMilli(), EndedAt: time.Now().UnixMilli(),
	}); err != nil {
		t.Fatal(err)
	}
	r := e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	if r.Announce.DeliveryRun != carrierRunID(c.RunID, 1) || r.Announce.Carrier != 1 {
		t.Fatalf("announce %+v", r.Announce)
	}
	bustest.WaitFor(t, 20*time.Second, "the announce in the requester", func() bool { return len(e.announces("agent:req:main")) == 1 })
	if rec, _, _ := e.runs.Get(ctx, AnnounceRunID(c.RunID)); rec.Status != runs.Error {
		t.Fatalf("the first carrier ran after all: %+v", rec)
	}
}

// An announce left "queued" on a carrying run that ended without carrying
// it (it failed before its prompt was in) is queued again by the sweep on
// the next carrier.
func TestSweepRequeuesAnnounceWhoseCarrierEnded(t *testing.T) {
	e := newChildEnv(t)
	ctx := bustest.Context(t)
	c := e.spawn(spawns.Child{Task: "job"})
	e.waitChild(c.ChildSessionKey, "announce delivered", announced)
	bustest.WaitFor(t, 20*time.Second, "the first announce", func() bool { return len(e.announces("agent:req:main")) == 1 })
	dead := c.RunID + ".dead-carrier"
	if err := e.runs.Create(ctx, &runs.Record{RunID: dead, SessionKey: "agent:req:main", AgentID: "req", Status: runs.Error, Error: "failed for good"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.g.reg.Update(ctx, c.ChildSessionKey, func(r *subagents.Record) error {
		a := *r.Announce
		a.State, a.DeliveryRun, a.At = subagents.AnnounceQueued, dead, 1
		r.Announce = &a
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := e.waitChild(c.ChildSessionKey, "announce delivered again", func(r *subagents.Record) bool {
		return announced(r) && r.Announce.DeliveryRun == carrierRunID(c.RunID, 1)
	})
	if r.Announce.Carrier != 1 {
		t.Fatalf("announce %+v", r.Announce)
	}
	bustest.WaitFor(t, 20*time.Second, "the second carrier's announce", func() bool { return len(e.announces("agent:req:main")) == 2 })
}
