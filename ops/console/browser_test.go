package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// The browser tests drive Debian's chromium headless through chromedp:
// one browser for the package, a fresh browser context (cookies apart)
// per test. They skip when chromium is missing, unless
// SESSIONBUS_BROWSER=required (CI sets it), which makes that a failure.

var shared struct {
	once    sync.Once
	ctx     context.Context // the browser's
	cancel  func()
	skipMsg string
	err     error
}

func chromiumPath() string {
	for _, p := range []string{os.Getenv("SESSIONBUS_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cancel != nil {
		shared.cancel()
	}
	os.Exit(bustest.CheckLeaks(code))
}

// tab opens a new browser context (its own cookies) on the shared browser.
func tab(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser: left out of the quick loop (go test -short)")
	}
	shared.once.Do(func() {
		path := chromiumPath()
		if path == "" {
			shared.skipMsg = "chromium not found (apt-get install chromium); set SESSIONBUS_BROWSER=required to fail instead"
			return
		}
		dir, err := os.MkdirTemp("", "sessionbus-chromium-")
		if err != nil {
			shared.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 900))
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil {
			shared.err = fmt.Errorf("start chromium: %w", err)
		}
		shared.ctx = bctx
		shared.cancel = func() { bcancel(); acancel(); _ = os.RemoveAll(dir) }
	})
	if shared.skipMsg != "" {
		if os.Getenv("SESSIONBUS_BROWSER") == "required" {
			t.Fatal(shared.skipMsg)
		}
		t.Skip(shared.skipMsg)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	ctx, cancel := chromedp.NewContext(shared.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// do runs steps, each wait bounded by a minute.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		shot(t, ctx, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// press clicks the element sel names once it is shown and enabled, through
// the element's own click() rather than a mouse event at coordinates: the
// pages re-render live (a status card, a board row, the signal log), and a
// mouse click aimed before a re-render lands on whatever moved under it.
func press(sel string) chromedp.Action[chromedp.Void] {
	return waitFor(`(s) => { const b = document.querySelector(s); if (!b || b.disabled || !b.checkVisibility()) return false; b.click(); return true; }`, sel)
}

// waitFor polls a JavaScript function of args until it returns truthy.
func waitFor(fn string, args ...any) chromedp.Action[chromedp.Void] {
	return chromedp.PollFunction[chromedp.Void](fn, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(time.Minute), chromedp.WithPollingArgs(args...))
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// shot writes a screenshot of the page to $SESSIONBUS_ARTIFACTS (else the
// test's temp dir).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SESSIONBUS_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Log(err)
		return
	}
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(dir, t.Name()+"-"+name+".png")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Log(err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// login opens the console and logs in with role's credentials.
func (f *fixture) login(t *testing.T, ctx context.Context, role auth.Role) {
	t.Helper()
	do(t, ctx, "log in as "+string(role),
		chromedp.Navigate(f.c.URL()),
		chromedp.WaitVisible("#login-creds"),
		chromedp.SetValue("#login-creds", f.credsText(role)),
		press("#login-submit"),
		waitFor(`(role) => document.querySelector('#whoami')?.dataset.role === role`, map[auth.Role]string{auth.RoleAdmin: "admin", auth.RoleOps: "viewer"}[role]),
	)
}

func hash(view, key string) string {
	return "location.hash = '#/" + view + "/' + encodeURIComponent(" + jsString(key) + ")"
}

func jsString(s string) string { return fmt.Sprintf("%q", s) }

// The sessions page lists the sessions, and a transcript holding markup
// shows it as text: no script runs, no element is made from it.
func TestBrowserSessionsAndHostileTranscript(t *testing.T) {
	f := newFixture(t)
	ctx := tab(t)
	hostile := `<script>window.pwned=1</script><img src=x onerror="window.pwned=2"> "><svg onload=window.pwned=3>`
	f.chatAs(mainKey, "ping "+hostile)
	f.login(t, ctx, auth.RoleAdmin)
	do(t, ctx, "list the sessions",
		waitFor(`(k) => !!document.querySelector('tr.session-row[data-key="' + k + '"]')`, mainKey))
	shot(t, ctx, "sessions")
	do(t, ctx, "open the session",
		chromedp.Evaluate[chromedp.Void](hash("session", mainKey)+"; 1"),
		waitFor(`(h) => [...document.querySelectorAll('#transcript .msg .text')].some(e => e.textContent.includes(h))`, hostile))
	shot(t, ctx, "session")
	if got := eval[string](t, ctx, `String(window.pwned)`); got != "undefined" {
		t.Fatalf("a transcript's markup ran: window.pwned = %s", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#main img, #main svg, #main script').length`); n != 0 {
		t.Fatalf("the transcript made %d elements from its text", n)
	}
	// an unknown key says so, instead of a blank page
	do(t, ctx, "open an unknown session",
		chromedp.Evaluate[chromedp.Void](hash("session", "agent:main:nope")+"; 1"),
		waitFor(`() => (document.querySelector('#session-missing')?.textContent || '').includes('no session')`))
}

// The board follows its children live: one finishing changes its row
// without a reload, and Kill ends another as killed.
func TestBrowserBoardLiveAndKill(t *testing.T) {
	f := newFixture(t)
	ctx := tab(t)
	done := f.spawn("finisher", "finisher")
	victim := f.spawn("victim", "victim")
	f.login(t, ctx, auth.RoleAdmin)
	row := `(k, s) => document.querySelector('tr.board-row[data-key="' + k + '"]')?.dataset.status === s`
	do(t, ctx, "open the board",
		chromedp.Evaluate[chromedp.Void](hash("board", mainKey)+"; window.sessionbusNoConfirm = true; window.sameLoad = 1; 1"),
		waitFor(row, done, "running"), waitFor(row, victim, "running"))
	shot(t, ctx, "board-running")
	kill := `tr.board-row[data-key="` + victim + `"] button.kill`
	do(t, ctx, "keep the victim's Kill button", chromedp.Evaluate[chromedp.Void](`window.victimKill = document.querySelector(`+jsString(kill)+`); 1`))
	f.finish("finisher")
	do(t, ctx, "the finished child's row", waitFor(row, done, "done"))
	if eval[int](t, ctx, `window.sameLoad || 0`) != 1 {
		t.Fatal("the page reloaded")
	}
	// a re-read keeps the rows that did not change: a button swapped for a
	// copy under the pointer would lose a click on its way to it
	if !eval[bool](t, ctx, `!!window.victimKill && window.victimKill.isConnected`) {
		t.Fatal("the board replaced the victim's Kill button when another child's row changed")
	}
	do(t, ctx, "kill from the board",
		press(kill),
		waitFor(row, victim, "killed"))
	shot(t, ctx, "board-killed")
	rec, _, err := f.stack.Worker.Deps.Subagents.Get(context.Background(), victim)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != "killed" && rec.EndedAt == 0 {
		t.Fatalf("registry record after the kill: outcome %q, ended %d", rec.Outcome, rec.EndedAt)
	}
	waitSignal(t, f, mainKey, "console:admin-test")
	// the kill's announce reaches the parent and says so
	do(t, ctx, "the kill's announce in the parent's transcript",
		chromedp.Evaluate[chromedp.Void](hash("session", mainKey)+"; 1"),
		waitFor(`() => [...document.querySelectorAll('#transcript .msg .text')].some(e => e.textContent.includes('victim') && e.textContent.includes('killed'))`))
	shot(t, ctx, "parent-after-kill")
}

// A message from the page goes into the session as webchat, and the reply
// shows in the transcript, the live box cleared once the turn ends.
func TestBrowserChat(t *testing.T) {
	f := newFixture(t)
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	do(t, ctx, "chat",
		chromedp.Evaluate[chromedp.Void](hash("session", mainKey)+"; 1"),
		chromedp.WaitVisible("#chat-text"), waitFor(`() => !document.querySelector("#chat-send").disabled`),
		chromedp.SetValue("#chat-text", "ping from the browser"),
		press("#chat-send"),
		waitFor(`() => [...document.querySelectorAll('#transcript .msg[data-role="assistant"] .text')].some(e => e.textContent.includes('pong: ping from the browser'))`),
		// the turn ended: its live box is empty again
		waitFor(`() => { const l = document.querySelector('#live'); return l.dataset.state === 'done' && l.textContent === ''; }`))
	shot(t, ctx, "chat")
	waitSignal(t, f, mainKey, "console:admin-test")
}

// An ops login sees no action controls, and the server refuses a kill
// forged from its page with 403.
func TestBrowserOpsViewer(t *testing.T) {
	f := newFixture(t)
	ctx := tab(t)
	child := f.spawn("watched", "watched")
	f.login(t, ctx, auth.RoleOps)
	do(t, ctx, "open the board",
		chromedp.Evaluate[chromedp.Void](hash("board", mainKey)+"; 1"),
		waitFor(`(k) => document.querySelector('tr.board-row[data-key="' + k + '"]')?.dataset.status === 'running'`, child))
	if n := eval[int](t, ctx, `document.querySelectorAll('button.kill, button.steer, #kill-all').length`); n != 0 {
		t.Fatalf("an ops login sees %d action controls on the board", n)
	}
	do(t, ctx, "open the session",
		chromedp.Evaluate[chromedp.Void](hash("session", mainKey)+"; 1"),
		waitFor(`() => document.querySelectorAll('#transcript .msg').length > 0`))
	if n := eval[int](t, ctx, `document.querySelectorAll('#chat, #chat-text, #chat-send, button.session-delete, button.session-reset').length`); n != 0 {
		t.Fatalf("an ops login sees the chat form or the reset and delete buttons")
	}
	status := eval[int](t, ctx, `fetch('/api/kill', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Sessionbus-Console': '1'}, body: JSON.stringify({target: `+jsString(child)+`})}).then(r => r.status)`)
	if status != 403 {
		t.Fatalf("a kill forged from an ops page: %d, want 403", status)
	}
	do(t, ctx, "open operations",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/ops'; 1`),
		waitFor(`() => (document.querySelector('#ops')?.textContent || '').includes('SB_RUNS')`))
	shot(t, ctx, "ops")
	f.finish("watched")
}
