package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/runs/runstest"
)

// TestSteerSurvivesGatewaySIGKILL: a human message steered (through the
// ingress, the test process's worker) into a turn whose gateway process
// is then SIGKILLed before the turn's next boundary reaches the turn once:
// another gateway process runs the redelivered run, its model request
// holds the prompt and then the message, and the transcript holds the
// message once, between the prompt and the reply.
func TestSteerSurvivesGatewaySIGKILL(t *testing.T) {
	stub := newModelStub(t, true)
	reached := make(chan struct{})
	stub.hold = turnOnce(false, "working", reached)
	ks := newKillStack(t, stub, 0)
	victim := ks.gateway(t, "gw-a")
	runID := ks.sendAsync(t, turnsTarget, "tell me everything")
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatal("the model was never asked")
	}
	body, _ := json.Marshal(map[string]any{"sessionKey": turnsTarget, "channel": "telegram", "from": "42", "text": "and the logs too"})
	out, err := bus.Inbound(bustest.Context(t), ks.Conn, ks.Worker.Deps.Names, ks.Token(bus.Caller{Adapter: "telegram"}), body)
	var acc struct{ Status, RunID string }
	if err != nil || json.Unmarshal(out, &acc) != nil || acc.Status != "steered" || acc.RunID != runID {
		t.Fatalf("steer: %s %v (running run %s)", out, err, runID)
	}
	sigkill(t, victim)
	ks.gateway(t, "gw-b")

	rec := runstest.WaitRun(t, ks.Worker.Deps.Runs, runID, 90*time.Second)
	if rec.Status != runs.OK || rec.Attempts != 2 || rec.Gateway != "gw-b" {
		t.Fatalf("run record after the kill: %+v", rec)
	}
	turns, _ := stub.split()
	if len(turns) != 2 {
		t.Fatalf("%d turn requests, want 2 (the cut one and the redelivered one)", len(turns))
	}
	var users []string
	for _, m := range turns[1] {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	if n := len(users); n < 2 || !strings.HasSuffix(users[n-2], "tell me everything") || users[n-1] != "and the logs too" || strings.Count(strings.Join(users, "\n"), "and the logs too") != 1 {
		t.Fatalf("the redelivered run's request: user messages %q", users)
	}
	prompts, replies, steered := killParts(t, ks.Stack, turnsTarget, runID, "and the logs too")
	if prompts != 1 || replies != 1 || steered != 1 {
		t.Fatalf("transcript: %d prompts, %d replies, %d entries with the steered message; want 1 each", prompts, replies, steered)
	}
}
