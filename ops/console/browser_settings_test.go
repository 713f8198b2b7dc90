package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// An admin changes a session's model, thinking level, send policy and
// goal from its page; each lands on the session's entry and in its signal
// log with the user. A sub-agent's model is asked of its controller (the
// child may not call session_status itself), whose refusal shows as an
// error. An ops login is refused a forged change.
func TestBrowserSettings(t *testing.T) {
	f := newFixture(t)
	child := f.spawn("configurable", "configurable")
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	ok := `(what) => { const m = document.querySelector('#settings-message'); return m.className === 'success' && m.textContent.startsWith(what); }`
	reset := `document.querySelector('#settings-message').className = ''; 1`
	do(t, ctx, "open the settings",
		chromedp.Evaluate[chromedp.Void](hash("session", mainKey)+"; 1"),
		chromedp.WaitVisible("#settings summary"), press("#settings summary"), chromedp.WaitVisible("#set-model"))
	do(t, ctx, "model", chromedp.SetValue("#set-model", "openai/slow-fixture"), press("#apply-model"), waitFor(ok, "model"))
	do(t, ctx, "thinking", chromedp.Evaluate[chromedp.Void](reset), chromedp.SetValue("#set-thinking", "high"), press("#apply-thinking"), waitFor(ok, "thinking"))
	do(t, ctx, "send policy", chromedp.Evaluate[chromedp.Void](reset), chromedp.SetValue("#set-send-policy", "off"), press("#apply-send-policy"), waitFor(ok, "send policy"))
	do(t, ctx, "goal", chromedp.Evaluate[chromedp.Void](reset), chromedp.SetValue("#set-goal", "ship the console"), press("#apply-goal"), waitFor(ok, "goal"))
	shot(t, ctx, "settings")
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, _, err := f.stack.Worker.Deps.Store.Get(c, mainKey)
	if err != nil {
		t.Fatal(err)
	}
	r := e.Rares()
	if r.ProviderOverride+"/"+r.ModelOverride != "openai/slow-fixture" || r.ThinkingLevel != "high" || e.SendPolicy() != rules.SendDeny ||
		r.Goal == nil || r.Goal.Objective != "ship the console" {
		t.Fatalf("entry after the settings: model %s/%s thinking %q send %q goal %+v", r.ProviderOverride, r.ModelOverride, r.ThinkingLevel, e.SendPolicy(), r.Goal)
	}
	for _, action := range []string{"model", "send-policy", "goal"} {
		waitSignalWhere(t, f, mainKey, func(ev signals.Event) bool {
			return ev.Payload["action"] == action && ev.ActorID == "console:admin-test"
		})
	}
	waitSignalWhere(t, f, mainKey, func(ev signals.Event) bool { return ev.Payload["thinkingLevel"] == "high" })

	// a child of another agent: its controller may not change it either
	// (session_status's agent-to-agent rule), and the page says so as an
	// error, the entry unchanged
	do(t, ctx, "a sub-agent's model",
		chromedp.Evaluate[chromedp.Void](hash("session", child)+"; 1"),
		chromedp.WaitVisible("#settings summary"), press("#settings summary"), chromedp.WaitVisible("#set-model"),
		chromedp.SetValue("#set-model", "anthropic/claude-fixture"), press("#apply-model"),
		waitFor(`() => { const m = document.querySelector('#settings-message'); return m.className === 'error' && m.textContent.includes('agentToAgent'); }`))
	ce, _, err := f.stack.Worker.Deps.Store.Get(c, child)
	if err != nil {
		t.Fatal(err)
	}
	if ce.Rares().ModelOverride != "" {
		t.Fatalf("a refused change changed the child's model: %q", ce.Rares().ModelOverride)
	}

	ops := f.client(f.credsText(auth.RoleOps))
	if code, body := f.do(ops, "POST", "/api/model", map[string]any{"key": mainKey, "thinkingLevel": "off"}, true); code != 403 {
		t.Fatalf("a model change forged by ops: %d %s, want 403", code, body)
	}
	if code, body := f.do(ops, "POST", "/api/session/goal", map[string]any{"key": mainKey, "clear": true}, true); code != 403 {
		t.Fatalf("a goal change forged by ops: %d %s, want 403", code, body)
	}
	f.finish("configurable")
}
