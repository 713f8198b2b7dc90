package handlers_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

func TestSessionsYieldResults(t *testing.T) {
	s := handlerstest.Start(t, nil)
	inRun := bus.Caller{SessionKey: mainKey, RunID: "run-1"}
	for _, tt := range []struct {
		caller bus.Caller
		params string
		want   map[string]any
	}{
		{inRun, `{}`, map[string]any{"status": "yielded", "message": "Turn yielded."}},
		{inRun, `{"message":"  "}`, map[string]any{"status": "yielded", "message": "Turn yielded."}},
		{inRun, `{"message":" waiting for 3 children "}`, map[string]any{"status": "yielded", "message": "waiting for 3 children"}},
		// an external client: a session but no run, so no turn to end
		{bus.Caller{SessionKey: mainKey}, `{}`, map[string]any{"status": "error", "error": "Yield not supported in this context"}},
		// a token naming no session
		{bus.Caller{SessionKey: " ", RunID: "run-1"}, `{}`, map[string]any{"status": "error", "error": "No session context"}},
	} {
		res, err := s.CallAs(tt.caller, "sessions_yield", tt.params)
		if err != nil || !reflect.DeepEqual(res, tt.want) {
			t.Errorf("%+v %s: %v %v, want %v", tt.caller, tt.params, res, err, tt.want)
		}
	}
	_, err := s.CallAs(inRun, "sessions_yield", `{"message":7}`)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != 400 || be.Message != "message must be a string" {
		t.Fatalf("non-string message: %v", err)
	}
}

// Through a gateway: the yield rule ends the turn, recorded ok, with the
// prompt in the transcript and no assistant reply.
func TestYieldEndsTheTurn(t *testing.T) {
	s := subagentsStack(t, nil)
	startGateway(t, s)
	for _, msg := range []string{"yield", "toolyield"} {
		session := "agent:main:" + msg
		id := submitRun(t, s, session, msg, nil)
		rec := waitRun(t, s, id)
		if rec.Status != runs.OK || rec.Reply != "" || rec.Error != "" {
			t.Fatalf("%s: run %+v", msg, rec)
		}
		if got := transcript(t, s, session); !reflect.DeepEqual(got, [][2]string{{"user", msg}}) {
			t.Fatalf("%s: transcript %v, want the prompt only", msg, got)
		}
	}
}

// Children that finished before their parent yields: the yield ends the
// turn at once (it waits for nothing), and each child's announce, queued
// by the gateway's announce flow as a run in the parent's session the
// moment the child ended, reaches the parent's transcript exactly once.
// The announces never depend on the yield, so nothing that already
// happened can be waited for (OpenClaw's yield deadlock).
func TestYieldAfterChildrenFinished(t *testing.T) {
	s := subagentsStack(t, nil)
	startGateway(t, s)
	parent := "agent:main:orchestrator"
	var kids []*subagents.Record
	for _, task := range []string{"quick one", "quick two"} {
		kids = append(kids, spawn(t, s, child{parent: parent, label: task, task: task}))
	}
	for _, k := range kids {
		if rec := waitRun(t, s, k.RunID); rec.Status != runs.OK || rec.Reply != "done: "+k.Task {
			t.Fatalf("child %s: %+v", k.Label, rec)
		}
	}
	yield := submitRun(t, s, parent, "yield", nil)
	if rec := waitRun(t, s, yield); rec.Status != runs.OK || rec.Reply != "" {
		t.Fatalf("yield run: %+v", rec)
	}
	for _, k := range kids {
		bustest.WaitFor(t, 30*time.Second, "the announce of "+k.Label+" is delivered", func() bool {
			rec, _, err := s.Worker.Deps.Subagents.Get(bustest.Context(t), k.ChildSessionKey)
			return err == nil && rec.Announce != nil && rec.Announce.State == subagents.AnnounceDelivered
		})
	}
	got := transcript(t, s, parent)
	count := func(sub string) (n int) {
		for _, e := range got {
			if e[0] == "user" && strings.Contains(e[1], sub) {
				n++
			}
		}
		return n
	}
	if n := count("yield"); n != 1 {
		t.Fatalf("the yield prompt appears %d times: %v", n, got)
	}
	for _, k := range kids {
		if n := count("session_key: " + k.ChildSessionKey + "\n"); n != 1 {
			t.Fatalf("the announce of %s appears %d times, want once: %v", k.ChildSessionKey, n, got)
		}
	}
}

// Kill through a gateway that is running the child's turn: the run record
// ends killed at once and the list shows it.
func TestSubagentsKillRunningTurn(t *testing.T) {
	s := subagentsStack(t, nil)
	startGateway(t, s)
	c := spawn(t, s, child{parent: mainKey, label: "slowpoke", task: "slow work"})
	waitStatus(t, s, c.RunID, runs.Running)
	res := s.MustCall(mainKey, "subagents", `{"action":"kill","target":"slowpoke"}`)
	if res["status"] != "ok" || res["text"] != "killed slowpoke." {
		t.Fatalf("kill: %v", res)
	}
	if st := runStatus(t, s, c.RunID); st != runs.Killed {
		t.Fatalf("run %q, want killed", st)
	}
	_, _, recent := listOf(t, s, mainKey, `{}`)
	if it := recent[c.ChildSessionKey]; it == nil || it["status"] != "killed" || it["endedAt"] == nil {
		t.Fatalf("list after kill: %v", recent)
	}
}

func waitStatus(t *testing.T, s *handlerstest.Stack, runID, status string) {
	t.Helper()
	// polled: the run record's watch only reports terminal states
	bustest.WaitFor(t, 30*time.Second, "run "+runID+" "+status, func() bool { return runStatus(t, s, runID) == status })
}
