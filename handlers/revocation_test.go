package handlers_test

import (
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// A kill revokes the child's run at once: a token of that run, accepted
// before (its call reaches the tool policy), gets 401 after, through the
// worker.
func TestKillRevokesTheRunsToken(t *testing.T) {
	s := subagentsStack(t, nil)
	c := spawn(t, s, child{parent: mainKey, label: "victim", task: "work"})
	as := bus.Caller{SessionKey: c.ChildSessionKey, RunID: c.RunID}
	tok := s.Token(as)
	// a leaf sub-agent may not list (403): the token itself was accepted
	_, err := bus.Call(bustest.Context(t), s.Conn, s.Worker.Deps.Names, tok, "sessions_list", nil)
	if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeForbidden {
		t.Fatalf("the run's token before the kill: %v", err)
	}
	if res := s.MustCall(mainKey, "subagents", `{"action":"kill","target":"victim"}`); res["status"] != "ok" {
		t.Fatalf("kill: %v", res)
	}
	bustest.WaitFor(t, 10*time.Second, "the kill's revocation", func() bool {
		_, ok := s.Worker.Deps.Revocations.RevokedAt(c.RunID)
		return ok
	})
	_, err = bus.Call(bustest.Context(t), s.Conn, s.Worker.Deps.Names, tok, "sessions_list", nil)
	if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeUnauthorized {
		t.Fatalf("the killed run's token: %v", err)
	}
}
