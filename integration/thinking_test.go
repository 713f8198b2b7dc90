package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
)

// TestThinkingReachesTheModel: a spawn's thinking and a session's
// thinkingLevel (session_status) reach the openai endpoint as its
// reasoning_effort; a session without one sends none; an unknown level is
// refused at spawn and at session_status with OpenClaw's texts.
func TestThinkingReachesTheModel(t *testing.T) {
	stub := newModelStub(t, true)
	s := turnsStack(t, stub, nil)
	lastEffort := func() string {
		stub.mu.Lock()
		defer stub.mu.Unlock()
		return stub.efforts[len(stub.efforts)-1]
	}

	sendTo(t, s, turnsTarget, "no level yet")
	if got := lastEffort(); got != "" {
		t.Fatalf("a session without a thinking level sent reasoning_effort %q", got)
	}

	res := s.MustCall(mainKey, "sessions_spawn", `{"task":"think about it","agentId":"oa","thinking":"high"}`)
	runID, _ := res["runId"].(string)
	if res["status"] != "accepted" || runID == "" {
		t.Fatalf("spawn: %v", res)
	}
	if rec := runstest.WaitRun(t, s.Worker.Deps.Runs, runID, 60*time.Second); rec.Status != runs.OK {
		t.Fatalf("child run: %+v", rec)
	}
	stub.mu.Lock()
	found := ""
	for i, r := range stub.reqs {
		if strings.Contains(r[len(r)-1].Content, "think about it") {
			found = stub.efforts[i]
		}
	}
	stub.mu.Unlock()
	if found != "high" {
		t.Fatalf("the child's turn sent reasoning_effort %q, want high", found)
	}

	s.MustCall(mainKey, "session_status", `{"sessionKey":"`+turnsTarget+`","thinkingLevel":"low"}`)
	sendTo(t, s, turnsTarget, "now low")
	if got := lastEffort(); got != "low" {
		t.Fatalf("after thinkingLevel low the turn sent reasoning_effort %q", got)
	}

	res = s.MustCall(mainKey, "sessions_spawn", `{"task":"x","agentId":"oa","thinking":"bogus"}`)
	if res["status"] != "error" || res["error"] != `Invalid thinking level "bogus". Use one of: off, minimal, low, medium, high, xhigh.` {
		t.Fatalf("spawn with thinking bogus: %v", res)
	}
	if _, err := s.Call(mainKey, "session_status", `{"sessionKey":"`+turnsTarget+`","thinkingLevel":"bogus"}`); err == nil ||
		!strings.Contains(err.Error(), `Thinking level "bogus" is not supported for`) {
		t.Fatalf("session_status thinkingLevel bogus: %v", err)
	}
}
