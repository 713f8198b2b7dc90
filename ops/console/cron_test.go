package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/kv/runs"
)

// TestCronPage: the cron page lists the jobs with their schedule and last
// outcome; an admin runs one now (its run ends ok on the gateway, and the
// job's session records who ran it); an ops login reads but may not run;
// a token login sees no jobs.
func TestCronPage(t *testing.T) {
	f := newFixture(t)
	s := f.stack
	names := bus.NewNames(s.Config.Bus.Prefix)
	ops := s.Token(bus.Caller{Adapter: bus.AnyChannel})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reply, err := bus.CronOp(ctx, s.Conn, names, "add", ops, []byte(`{"name":"nightly ping","schedule":{"kind":"cron","expr":"0 3 * * *"},`+
		`"payload":{"kind":"agentTurn","message":"ping nightly"},"delivery":{"mode":"none"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var job struct{ ID string }
	_ = json.Unmarshal(reply, &job)

	admin := f.client(f.credsText(auth.RoleAdmin))
	if code, body := f.do(admin, "GET", "/api/cron", nil, false); code != 200 || !strings.Contains(body, job.ID) || !strings.Contains(body, "0 3 * * *") {
		t.Fatalf("cron list: %d %s", code, body)
	}
	reader := f.client(f.credsText(auth.RoleOps))
	if code, body := f.do(reader, "GET", "/api/cron", nil, false); code != 200 || !strings.Contains(body, job.ID) {
		t.Fatalf("ops reads the cron list: %d %s", code, body)
	}
	if code, body := f.do(reader, "POST", "/api/cron/run", map[string]any{"jobId": job.ID}, true); code != 403 {
		t.Fatalf("ops runs a job: %d %s, want 403", code, body)
	}
	tokUser := f.client("")
	if code, body := f.do(tokUser, "POST", "/api/login", map[string]any{"token": s.Token(bus.Caller{SessionKey: mainKey})}, false); code != 200 {
		t.Fatalf("token login: %d %s", code, body)
	}
	if code, body := f.do(tokUser, "GET", "/api/cron", nil, false); code != 403 || strings.Contains(body, job.ID) {
		t.Fatalf("a token login reads cron jobs: %d %s", code, body)
	}
	code, body := f.do(admin, "POST", "/api/cron/run", map[string]any{"jobId": job.ID, "agentId": "main"}, true)
	var run struct{ RunID string }
	if code != 200 || json.Unmarshal([]byte(body), &run) != nil || run.RunID == "" {
		t.Fatalf("admin runs the job: %d %s", code, body)
	}
	rec, err := s.Worker.Deps.Runs.Wait(ctx, run.RunID)
	if err != nil || rec.Status != runs.OK || rec.Reply != "pong: ping nightly" {
		t.Fatalf("the run: %+v %v", rec, err)
	}
	ch, err := s.Worker.Deps.Signals.Since(ctx, "agent:main:cron:"+job.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ch)
	if !strings.Contains(string(b), "console_action") {
		t.Fatalf("the job's session does not record the console's run: %s", b)
	}
}
