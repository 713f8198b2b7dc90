package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// axeSource is axe-core's script (npm axe-core, which .ci/run installs
// into .ci/axe and names in SESSIONBUS_AXE). With SESSIONBUS_AXE set, a
// missing file fails; without it, a checkout that never installed it
// skips the accessibility checks.
func axeSource(t *testing.T) string {
	t.Helper()
	path, required := os.Getenv("SESSIONBUS_AXE"), true
	if path == "" {
		path, required = filepath.Join("..", "..", ".ci", "axe", "node_modules", "axe-core", "axe.min.js"), false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if required {
			t.Fatalf("SESSIONBUS_AXE=%s: %v", path, err)
		}
		t.Skipf("axe-core not installed (npm install --prefix .ci/axe axe-core, or set SESSIONBUS_AXE): %v", err)
	}
	return string(b)
}

type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// axeCheck runs axe-core on the page and fails on each serious or
// critical violation.
func axeCheck(t *testing.T, ctx context.Context, src, page string) {
	t.Helper()
	if !eval[bool](t, ctx, `typeof window.axe === 'object'`) {
		do(t, ctx, "inject axe-core", chromedp.Evaluate[chromedp.Void](src+"\n;1"))
	}
	raw := eval[string](t, ctx, `axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations))`)
	var vs []axeViolation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		t.Fatalf("%s: axe result: %v", page, err)
	}
	for _, v := range vs {
		if v.Impact != "serious" && v.Impact != "critical" {
			continue
		}
		var where []string
		for i, n := range v.Nodes {
			if i == 3 {
				where = append(where, fmt.Sprintf("and %d more", len(v.Nodes)-3))
				break
			}
			where = append(where, fmt.Sprint(n.Target)+" "+n.HTML)
		}
		t.Errorf("%s: %s (%s): %s: %s", page, v.ID, v.Impact, v.Help, strings.Join(where, "; "))
	}
}

func colorScheme(t *testing.T, ctx context.Context, scheme string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(c, func(ctx context.Context, tg *chromedp.Target) (cdp.Empty, error) {
		return cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
	}); err != nil {
		t.Fatal(err)
	}
}

// Every page, in the light and the dark theme, has no serious or critical
// accessibility violation as axe-core counts them, and each is
// screenshotted (the artifacts docs/console.md shows). The login form too.
func TestBrowserAccessibilityAndScreenshots(t *testing.T) {
	f := newFixture(t)
	ctx := tab(t)
	src := axeSource(t)
	child := f.spawn("a11y child", "a11y")
	f.chatAs(mainKey, "ping **markdown** and `code`")
	const found = "agent:main:group:a11y-search"
	f.appendTo(found, "what the quokka parliament decided", hostileText)
	f.startIndexer()
	hit := f.waitHits(f.client(f.credsText(auth.RoleAdmin)), "quokka parliament", 2).Results[1]
	pages := []struct{ name, hash, ready string }{
		{"sessions", `location.hash = '#/sessions'; 1`, `() => document.querySelectorAll('tr.session-row').length > 1`},
		{"session", hash("session", mainKey) + "; 1", `() => document.querySelectorAll('#transcript .msg').length > 0 && document.querySelectorAll('#status-card dt').length > 0`},
		{"child", hash("session", child) + "; 1", `() => document.querySelectorAll('#transcript .msg').length > 0`},
		{"board", hash("board", mainKey) + "; 1", `() => document.querySelectorAll('tr.board-row').length > 0`},
		{"timeline", hash("timeline", mainKey) + "; 1", `() => document.querySelectorAll('#timeline tr').length > 1`},
		{"ops", `location.hash = '#/ops'; 1`, `() => (document.querySelector('#ops')?.textContent || '').includes('SB_RUNS')`},
		{"search", `location.hash = '#/search?q=quokka+parliament'; 1`, `() => document.querySelectorAll('tr.search-hit mark').length > 1`},
		{"hit", fmt.Sprintf("location.hash = '#/session/' + encodeURIComponent(%q) + '?entry=%d&seq=%d'; 1", found, hit.Entry, hit.Seq), `() => !!document.querySelector('#transcript .msg.hit')`},
	}
	for _, scheme := range []string{"dark", "light"} {
		colorScheme(t, ctx, scheme)
		do(t, ctx, "the login form", chromedp.Navigate(f.c.URL()), chromedp.WaitVisible("#login-creds"))
		shot(t, ctx, "login-"+scheme)
		axeCheck(t, ctx, src, "login ("+scheme+")")
	}
	f.login(t, ctx, auth.RoleAdmin)
	for _, scheme := range []string{"light", "dark"} {
		colorScheme(t, ctx, scheme)
		for _, p := range pages {
			do(t, ctx, p.name+" "+scheme, chromedp.Evaluate[chromedp.Void](p.hash), waitFor(p.ready))
			shot(t, ctx, p.name+"-"+scheme)
			axeCheck(t, ctx, src, p.name+" ("+scheme+")")
		}
	}
	f.finish("a11y")
}

// The page works from the keyboard: Tab reaches the sessions' links in
// order after the header's, focus shows, and Enter opens a session.
func TestBrowserKeyboard(t *testing.T) {
	f := newFixture(t)
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	row := `tr.session-row[data-key="` + mainKey + `"] a.session-link`
	do(t, ctx, "the sessions page", waitFor(`(s) => !!document.querySelector(s)`, row))
	var seen []string
	for i := 0; i < 40; i++ {
		do(t, ctx, "tab", chromedp.KeyEvent("\t"))
		el := eval[string](t, ctx, `(() => { const a = document.activeElement; return a.tagName + (a.id ? '#' + a.id : '') + (a.classList.contains('session-link') ? '.session-link' : ''); })()`)
		seen = append(seen, el)
		if eval[bool](t, ctx, `document.activeElement === document.querySelector(`+jsString(row)+`)`) {
			break
		}
	}
	if !eval[bool](t, ctx, `document.activeElement === document.querySelector(`+jsString(row)+`)`) {
		t.Fatalf("Tab never reached main's link; focus went %v", seen)
	}
	if style := eval[string](t, ctx, `getComputedStyle(document.activeElement).outlineStyle`); style == "none" {
		t.Fatalf("the focused link shows no outline")
	}
	do(t, ctx, "Enter opens the session",
		chromedp.KeyEvent("\r"),
		waitFor(`(k) => location.hash === '#/session/' + encodeURIComponent(k)`, mainKey),
		waitFor(`() => document.querySelectorAll('#transcript .msg').length > 0`))
}
