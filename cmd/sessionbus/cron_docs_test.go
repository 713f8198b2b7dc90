package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
)

// cronDocCommands are the lines of docs/cron.md's quick start.
func cronDocCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/cron.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Quick start\n")
	if !ok {
		t.Fatal("docs/cron.md has no ## Quick start")
	}
	_, block, _ := strings.Cut(sec, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	return strings.Split(strings.TrimSpace(block), "\n")
}

// TestCronDocsCommands runs docs/cron.md's quick start against a server,
// a worker and a gateway: the job it adds ticks every second and its runs
// end ok; each later command acts on it; bad input exits 1, a usage error
// 2, and neither writes a job.
func TestCronDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op, err := bus.LoadOrCreateOperator(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := bustest.Context(t)
	cfg := config.Default()
	w, err := handlers.StartWorker(ctx, nc, cfg, bus.NewVerifier(op.PublicKey()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	gw, err := gateway.Start(ctx, nc, cfg, op, "gw-cron", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	creds := bustest.AdminCreds(t, s.Deployment(), op)
	cli := func(words ...string) (int, string, string) {
		var out, errb syncBuffer
		args := append([]string{words[0], words[1], "--server", s.URL(), "--creds", creds}, words[2:]...)
		code := run(args, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	jobID := ""
	for _, line := range cronDocCommands(t) {
		words := shellWords(t, strings.ReplaceAll(line, "JOBID", jobID))
		if words[0] != "sessionbus" || words[1] != "cron" {
			t.Fatalf("docs/cron.md quick start runs %q: only sessionbus cron commands belong there", line)
		}
		code, out, errText := cli(words[1:]...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", line, code, out, errText)
		}
		switch words[2] {
		case "add":
			var j struct{ ID string }
			if err := json.Unmarshal([]byte(out), &j); err != nil || j.ID == "" {
				t.Fatalf("%s printed %q", line, out)
			}
			if jobID == "" {
				jobID = j.ID
				// let it tick: the next commands read its runs
				bustest.WaitFor(t, 15*time.Second, "two runs that ended ok", func() bool {
					_, out, _ := cli("cron", "runs", "--json", "--id", jobID)
					return strings.Count(out, `"outcome": "ok"`) >= 2
				})
			}
		case "list":
			if !strings.Contains(out, jobID) || !strings.Contains(out, "every 1s") || !strings.Contains(out, "ok") {
				t.Fatalf("list does not show the job, its schedule and last outcome:\n%s", out)
			}
		case "run":
			if !strings.Contains(out, `"enqueued": true`) {
				t.Fatalf("run printed %s", out)
			}
		case "disable":
			if !strings.Contains(out, `"enabled": false`) {
				t.Fatalf("disable printed %s", out)
			}
		case "rm":
			if code, _, errText := cli("cron", "runs", "--id", jobID); code != 1 || !strings.Contains(errText, "unknown cron job id") {
				t.Fatalf("runs of a removed job: exit %d %s", code, errText)
			}
		}
	}
	if code, _, errText := cli("cron", "add", "--name", "bad", "--cron", "0 25 * * *", "--message", "x"); code != 1 || !strings.Contains(errText, "invalid cron expression") {
		t.Fatalf("bad cron: exit %d %s", code, errText)
	}
	if code, _, _ := cli("cron", "add", "--name", "bad", "--every", "1s", "--cron", "* * * * *", "--message", "x"); code != 2 {
		t.Fatalf("two schedules: exit %d, want 2 (usage)", code)
	}
	if code, _, _ := cli("cron", "enable"); code != 2 {
		t.Fatalf("enable without an id: exit %d, want 2", code)
	}
	_, out, _ := cli("cron", "list", "--json")
	if strings.Count(out, `"name"`) != 1 || !strings.Contains(out, "Reminder") {
		t.Fatalf("after the quick start only the reminder is left:\n%s", out)
	}
}
