package gateway

import (
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// An agent-to-agent announce whose target the send policy denies is not
// delivered to the channel (the flow still ends, Delivered false), and one
// it allows is.
func TestA2AAnnounceConsultsSendPolicy(t *testing.T) {
	e := newEnv(t)
	e.cfg.Session.SendPolicy = &config.SendPolicy{Default: "allow", Rules: []config.SendPolicyRule{
		{Action: "deny", Match: config.SendPolicyMatch{Channel: "discord", ChatType: "group"}},
	}}
	e.gateway("gw1", Options{})
	req := a2aRequest(e, "agent:main:discord:group:123", "hi target", 0)
	e.submit(req)
	if rec := e.wait(req.RunID); rec.Status != runs.OK {
		t.Fatalf("primary %+v", rec)
	}
	if ann := e.wait(StepRunID(req.RunID, "announce")); ann.Reply != "Announced: all good" {
		t.Fatalf("announce run %+v", ann)
	}
	if st := e.waitState(req.RunID); st.Delivered {
		t.Fatalf("a denied announce was delivered: %+v", st)
	}
	if d, _ := e.lastDelivery("discord"); d != nil {
		t.Fatalf("delivered despite the send policy: %+v", d)
	}

	allowed := a2aRequest(e, "agent:main:slack:group:9", "hi target", 0)
	e.submit(allowed)
	if st := e.waitState(allowed.RunID); !st.Delivered {
		t.Fatalf("an allowed announce was not delivered: %+v", st)
	}
	if d, _ := e.lastDelivery("slack"); d == nil || d.Message != "Announced: all good" {
		t.Fatalf("slack delivery %+v", d)
	}
}
