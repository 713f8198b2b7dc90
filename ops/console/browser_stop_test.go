package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// Stop on a session's page ends its running turn: the run record is
// aborted, the button goes once nothing runs, and the signal log names
// the user. An ops login sees no Stop and is refused a forged one.
func TestBrowserStop(t *testing.T) {
	f := newFixture(t)
	child := f.spawn("stoppable", "never")
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	do(t, ctx, "a running turn shows Stop",
		chromedp.Evaluate[chromedp.Void](hash("session", child)+"; 1"),
		waitFor(`() => { const b = document.querySelector('#stop'); return b && !b.hidden; }`),
		waitFor(`() => !!document.querySelector('#runs tr.run[data-status="running"]')`))
	runID := eval[string](t, ctx, `document.querySelector('#runs tr.run[data-status="running"] a').title`)
	shot(t, ctx, "stop-running")
	do(t, ctx, "stop it",
		press("#stop"),
		waitFor(`() => document.querySelector('#live').dataset.stop === 'aborted'`),
		waitFor(`(id) => !!document.querySelector('#runs tr.run[data-status="aborted"] a[title="' + id + '"]')`, runID),
		waitFor(`() => document.querySelector('#stop').hidden`))
	shot(t, ctx, "stop-aborted")
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, _, err := f.stack.Worker.Deps.Runs.Get(c, runID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != runs.Aborted {
		t.Fatalf("run %s after Stop: %s, want %s", runID, rec.Status, runs.Aborted)
	}
	waitSignalWhere(t, f, child, func(ev signals.Event) bool {
		return ev.Payload["action"] == "stop" && ev.ActorID == "console:admin-test"
	})

	ops := f.client(f.credsText(auth.RoleOps))
	if code, body := f.do(ops, "POST", "/api/stop", map[string]any{"key": child}, true); code != 403 {
		t.Fatalf("a stop forged by an ops login: %d %s, want 403", code, body)
	}
	admin := f.client(f.credsText(auth.RoleAdmin))
	if code, body := f.do(admin, "POST", "/api/stop", map[string]any{"key": child}, false); code != 403 {
		t.Fatalf("a stop without the action header (a cross-site form): %d %s, want 403", code, body)
	}
}
