package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

// TestMicroStatsCountEveryReply drives the stock nats CLI: after 10 good
// calls and 3 thrown errors of sessions_list (and one call of a tool nobody
// serves), `nats micro stats sessionbus --json` shows 13 requests and 3
// errors on sessions_list, nothing on any other endpoint, and no catch-all;
// `nats micro info` still names one endpoint per tool on its subject.
func TestMicroStatsCountEveryReply(t *testing.T) {
	st := handlerstest.Start(t, nil)
	s, nc, op, w := st.Server, st.Conn, st.Operator, st.Worker

	tok, err := op.Mint(bus.Caller{SessionKey: mainKey}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	names := bus.NewNames("")
	call := bustest.Caller(nc, names, tok)
	for i := 0; i < 10; i++ {
		if err := call("sessions_list", `{}`); err != nil {
			t.Fatalf("good call %d: %v", i, err)
		}
	}
	for i := 0; i < 3; i++ {
		err := call("sessions_list", `{"limit":0}`)
		if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeBadRequest {
			t.Fatalf("thrown call %d: want a 400, got %v", i, err)
		}
	}
	if e, ok := bus.AsError(call("no_such_tool", `{}`)); !ok || e.Code != bus.CodeNotFound {
		t.Fatalf("unknown tool: want a 404, got %v", e)
	}

	nats := binary(t, "nats")
	ops := bustest.RoleCreds(t, s.Deployment(), auth.RoleOps)
	out, errOut, code := run(t, "", nats, "-s", s.URL(), "--creds", ops, "micro", "stats", "sessionbus", "--json")
	if code != 0 {
		t.Fatalf("nats micro stats: exit %d: %s %s", code, out, errOut)
	}
	var stats []micro.Stats
	if err := json.Unmarshal([]byte(out), &stats); err != nil || len(stats) != 1 {
		t.Fatalf("nats micro stats --json: want one instance, got %v: %s", err, out)
	}
	seen := map[string]bool{}
	for _, e := range stats[0].Endpoints {
		seen[e.Name] = true
		switch e.Name {
		case "sessions_list":
			if e.NumRequests != 13 || e.NumErrors != 3 {
				t.Errorf("sessions_list: %d requests, %d errors; want 13 and 3", e.NumRequests, e.NumErrors)
			}
			if e.LastError != "400:limit must be a positive integer" {
				t.Errorf("sessions_list last error = %q", e.LastError)
			}
			if e.ProcessingTime <= 0 || e.AverageProcessingTime != e.ProcessingTime/13 {
				t.Errorf("sessions_list processing time %v, average %v", e.ProcessingTime, e.AverageProcessingTime)
			}
		default:
			if e.NumRequests != 0 || e.NumErrors != 0 {
				t.Errorf("endpoint %s (subject %s): %d requests, %d errors; want none", e.Name, e.Subject, e.NumRequests, e.NumErrors)
			}
		}
		if e.Subject != names.Tool(e.Name) {
			t.Errorf("endpoint %s listens on %s, want %s (no catch-all)", e.Name, e.Subject, names.Tool(e.Name))
		}
	}
	if !seen["sessions_list"] {
		t.Errorf("no sessions_list endpoint in %s", out)
	}

	out, errOut, code = run(t, "", nats, "-s", s.URL(), "--creds", ops, "micro", "info", "sessionbus", "--json")
	var info struct {
		Info micro.Info `json:"info"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil {
		t.Fatalf("nats micro info: exit %d: %s %s", code, out, errOut)
	}
	subjects := map[string]string{}
	for _, e := range info.Info.Endpoints {
		subjects[e.Name] = e.Subject
	}
	for tool := range handlers.Tools(w.Deps) {
		if subjects[tool] != names.Tool(tool) {
			t.Errorf("nats micro info: endpoint %s on %q, want %q", tool, subjects[tool], names.Tool(tool))
		}
	}
	if len(subjects) != len(handlers.Tools(w.Deps)) {
		t.Errorf("nats micro info lists %v; want exactly one endpoint per tool", subjects)
	}
	out, _, code = run(t, "", nats, "-s", s.URL(), "--creds", ops, "micro", "ls", "sessionbus")
	if code != 0 || !strings.Contains(out, "sessionbus") {
		t.Fatalf("nats micro ls: exit %d: %s", code, out)
	}
}
