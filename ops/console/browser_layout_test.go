package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// The pages fit a phone, a tablet and a desktop without scrolling
// sideways; the model column shows the session's model; keys show short
// with the whole key on hover and a copy button; a steer the tool
// accepted shows as success; and the page follows the system's dark
// theme.
func TestBrowserLayoutAndThemes(t *testing.T) {
	f := newFixture(t)
	child := f.spawn("steered", "steered")
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	row := `tr.session-row[data-key="` + mainKey + `"]`
	do(t, ctx, "the sessions page", waitFor(`(s) => !!document.querySelector(s)`, row))
	if got := eval[string](t, ctx, `document.querySelector('`+row+` td:nth-child(6)').textContent`); got != fixtureModel {
		t.Fatalf("main's model column: %q, want %q", got, fixtureModel)
	}
	do(t, ctx, "the child's row", waitFor(`(k) => !!document.querySelector('tr.session-row[data-key="' + k + '"]')`, child))
	link := `tr.session-row[data-key="` + child + `"] a.session-link`
	if title, text := eval[string](t, ctx, `document.querySelector('`+link+`').title`), eval[string](t, ctx, `document.querySelector('`+link+`').textContent`); title != child || len(text) >= len(child) {
		t.Fatalf("the child's key: shown %q, title %q", text, title)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('`+link+` + button.copy').length`); n != 1 {
		t.Fatalf("the child's key has %d copy buttons", n)
	}

	do(t, ctx, "steer from the board",
		chromedp.Evaluate[chromedp.Void](hash("board", mainKey)+"; window.prompt = () => 'go left'; 1"),
		waitFor(`(k) => !!document.querySelector('tr.board-row[data-key="' + k + '"] button.steer')`, child),
		press(`tr.board-row[data-key="`+child+`"] button.steer`),
		waitFor(`() => (document.querySelector('#board-message')?.textContent || '').startsWith('steer:')`))
	if cls, text := eval[string](t, ctx, `document.querySelector('#board-message').className`), eval[string](t, ctx, `document.querySelector('#board-message').textContent`); cls != "success" {
		t.Fatalf("an accepted steer shows as %q: %s", cls, text)
	}

	pages := []struct{ name, hash, ready string }{
		{"sessions", `location.hash = '#/sessions'; 1`, `() => document.querySelectorAll('tr.session-row').length > 1`},
		{"session", hash("session", mainKey) + "; 1", `() => document.querySelectorAll('#transcript .msg').length > 0 && document.querySelectorAll('#status-card dt').length > 0`},
		{"child", hash("session", child) + "; 1", `() => document.querySelectorAll('#transcript .msg').length > 0`},
		{"board", hash("board", mainKey) + "; 1", `() => document.querySelectorAll('tr.board-row').length > 0`},
		{"ops", `location.hash = '#/ops'; 1`, `() => (document.querySelector('#ops')?.textContent || '').includes('SB_RUNS')`},
	}
	for _, w := range []int64{390, 820, 1400} {
		for _, p := range pages {
			do(t, ctx, fmt.Sprintf("%s at %d px", p.name, w),
				chromedp.EmulateViewport(w, 900),
				chromedp.Evaluate[chromedp.Void](p.hash),
				waitFor(p.ready))
			sw, iw := eval[int](t, ctx, `document.scrollingElement.scrollWidth`), eval[int](t, ctx, `window.innerWidth`)
			if w != 1400 || p.name == "session" {
				shot(t, ctx, fmt.Sprintf("%s-%d", p.name, w))
			}
			if sw > iw {
				t.Errorf("%s at %d px scrolls sideways: scrollWidth %d > innerWidth %d", p.name, w, sw, iw)
			}
		}
	}

	bg := `getComputedStyle(document.body).backgroundColor`
	light := eval[string](t, ctx, bg)
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(c, func(ctx context.Context, tg *chromedp.Target) (cdp.Empty, error) {
		return cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
	}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the session page, dark", chromedp.Evaluate[chromedp.Void](hash("session", mainKey)+"; 1"),
		waitFor(`() => document.querySelectorAll('#transcript .msg').length > 0`))
	shot(t, ctx, "session-dark")
	if dark := eval[string](t, ctx, bg); dark == light || dark != "rgb(18, 22, 28)" {
		t.Fatalf("dark theme background %q (light %q)", dark, light)
	}
	f.finish("steered")
}
