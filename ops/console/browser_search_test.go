package console_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// The search page from the keyboard: with no indexer it says one must
// run; a phrase then finds its message with the words marked and the
// transcript's markup shown as text (nothing made of it, nothing run);
// the index's freshness shows; a bad query and a phrase with no hits say
// so; and the hit opens its session at that message, scrolled to,
// marked and focused, though it is older than the newest page. Back
// returns to the hits. At a phone's width the page does not scroll
// sideways.
func TestBrowserSearch(t *testing.T) {
	f := newFixture(t)
	const key = "agent:main:group:search-browser"
	texts := make([]string, 260)
	for i := range texts {
		texts[i] = fmt.Sprintf("filler message number %d", i)
	}
	// entry 6, far above the newest 200 the session page shows
	texts[5] = hostileText
	f.appendTo(key, texts...)
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)

	search := func(what, q string) {
		t.Helper()
		do(t, ctx, what,
			chromedp.Evaluate[chromedp.Void](`location.hash = '#/search'; 1`),
			chromedp.WaitVisible("#search-query"),
			waitFor(`() => document.activeElement === document.querySelector('#search-query')`),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#search-query').value = ''; 1`),
			chromedp.SendKeys("#search-query", q+"\r"))
	}
	state := func(st string) chromedp.Action[chromedp.Void] {
		return waitFor(`(st) => document.querySelector('#search-status')?.dataset.state === st`, st)
	}

	search("search without an indexer", "quokka parliament")
	do(t, ctx, "no indexer", state("no-indexer"))
	if txt := eval[string](t, ctx, `document.querySelector('#search-status').textContent`); !contains(txt, "not running", "sessionbus indexer") {
		t.Fatalf("no indexer: %q", txt)
	}
	shot(t, ctx, "no-indexer")

	f.startIndexer()
	admin := f.client(f.credsText(auth.RoleAdmin))
	hit := f.waitHits(admin, "quokka parliament", 1).Results[0]

	search("search a phrase", "quokka parliament")
	do(t, ctx, "the hit", state("ready"),
		waitFor(`(seq) => !!document.querySelector('tr.search-hit[data-seq="' + seq + '"] a.hit-link mark')`, fmt.Sprint(hit.Seq)))
	shot(t, ctx, "hits")
	if got := eval[string](t, ctx, `[...document.querySelectorAll('tr.search-hit mark')].map(m => m.textContent).join(' ')`); !contains(got, "quokka", "parliament") || contains(got, "img") {
		t.Fatalf("marked: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('tr.search-hit a.hit-link').textContent`); !contains(got, "<img", "onerror") {
		t.Fatalf("the snippet should show the transcript's markup as text: %q", got)
	}
	if got := eval[string](t, ctx, `String(window.pwned)`); got != "undefined" {
		t.Fatalf("a transcript's markup ran from a snippet: window.pwned = %s", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#main img, #main script, #main svg').length`); n != 0 {
		t.Fatalf("the snippet made %d elements from its text", n)
	}
	if got := eval[string](t, ctx, `document.querySelector('#search-index').textContent`); !contains(got, "index ready", "stream sequence") {
		t.Fatalf("freshness: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('tr.search-hit').textContent`); !contains(got, "assistant", "#6") {
		t.Fatalf("the hit's row: %q", got)
	}

	// Tab reaches the hit's link, and Enter opens the session at it
	for i := 0; i < 30 && !eval[bool](t, ctx, `document.activeElement?.classList.contains('hit-link')`); i++ {
		do(t, ctx, "tab", chromedp.KeyEvent("\t"))
	}
	if !eval[bool](t, ctx, `document.activeElement?.classList.contains('hit-link')`) {
		t.Fatal("Tab never reached the hit's link")
	}
	do(t, ctx, "open the hit", chromedp.KeyEvent("\r"),
		waitFor(`(k) => location.hash.startsWith('#/session/' + encodeURIComponent(k) + '?')`, key),
		waitFor(`(seq) => !!document.querySelector('#transcript .msg.hit[data-seq="' + seq + '"]')`, fmt.Sprint(hit.Seq)))
	shot(t, ctx, "at-hit")
	msg := `document.querySelector('#transcript .msg.hit')`
	if got := eval[string](t, ctx, msg+`.textContent`); !contains(got, "quokka parliament", "<img") {
		t.Fatalf("the marked message: %q", got)
	}
	if !eval[bool](t, ctx, `document.activeElement === `+msg) {
		t.Fatal("the hit's message does not have the focus")
	}
	// scrolled to: inside the transcript's visible box
	if !eval[bool](t, ctx, `(() => { const m = `+msg+`.getBoundingClientRect(), b = document.querySelector('#transcript').getBoundingClientRect(); return m.top >= b.top - 1 && m.top < b.bottom; })()`) {
		t.Fatal("the hit's message is not scrolled into view")
	}
	if got := eval[string](t, ctx, `document.querySelector('#hit-note')?.textContent || ''`); !contains(got, "of 260", "show the newest") {
		t.Fatalf("the note of an older page: %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#main img, #main script, #main svg').length`); n != 0 || eval[string](t, ctx, `String(window.pwned)`) != "undefined" {
		t.Fatal("the message's markup made elements or ran")
	}
	do(t, ctx, "back to the hits", chromedp.NavigateBack(),
		state("ready"), waitFor(`() => document.querySelectorAll('tr.search-hit').length === 1`))

	search("a phrase with no hits", "no such words were ever said")
	do(t, ctx, "no hits", state("empty"))
	search("a bad query", "!!!")
	do(t, ctx, "a bad query", state("bad-query"))
	if got := eval[string](t, ctx, `document.querySelector('#search-status').textContent`); !contains(got, "cannot run", "no letter") {
		t.Fatalf("a bad query: %q", got)
	}

	search("search at a phone's width", "filler message")
	do(t, ctx, "phone", chromedp.EmulateViewport(390, 900), state("ready"))
	shot(t, ctx, "hits-390")
	if sw, iw := eval[int](t, ctx, `document.scrollingElement.scrollWidth`), eval[int](t, ctx, `window.innerWidth`); sw > iw {
		t.Errorf("the search page at 390 px scrolls sideways: scrollWidth %d > innerWidth %d", sw, iw)
	}
	do(t, ctx, "older", press("#search-next"),
		waitFor(`() => location.hash.includes('offset=25') && document.querySelector('#search-status')?.dataset.state === 'ready' && document.querySelector('#search-status').textContent.startsWith('26–50 ')`))
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
