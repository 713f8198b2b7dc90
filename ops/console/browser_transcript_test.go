package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// A sub-agent's page reads, for admin and ops, on the console's own
// path: a leaf child's tools may not call session_status or
// sessions_history, and its page still shows its card and transcript.
func TestBrowserLeafChildPage(t *testing.T) {
	f := newFixture(t)
	child := f.spawn("leafy", "leafy")
	for _, role := range []auth.Role{auth.RoleAdmin, auth.RoleOps} {
		ctx := tab(t)
		f.login(t, ctx, role)
		do(t, ctx, "open the leaf child's page as "+string(role),
			chromedp.Evaluate[chromedp.Void](hash("session", child)+"; 1"),
			waitFor(`() => document.querySelectorAll('#status-card dt').length > 0`),
			waitFor(`() => [...document.querySelectorAll('#transcript .msg[data-role="user"] .text')].some(e => e.textContent.includes('wait:leafy'))`))
		shot(t, ctx, "leaf-"+string(role))
		if txt := eval[string](t, ctx, `document.querySelector('#main').textContent`); strings.Contains(txt, "not available to sub-agent sessions") {
			t.Fatalf("%s sees the child's tool policy on its page: %q", role, txt)
		}
		card := eval[string](t, ctx, `document.querySelector('#status-card').textContent`)
		if !strings.Contains(card, "agent") || !strings.Contains(card, "slow") || !strings.Contains(card, "spawned by") {
			t.Fatalf("%s: the leaf's card: %q", role, card)
		}
	}
	f.finish("leafy")
}

// A transcript renders readably: an internal context block folded under
// a label, a compaction as a divider with its summary behind a toggle, a
// tool call and its result folded under the tool's name, a silent reply
// not at all, Markdown as elements, and hostile text as text (a
// javascript: link stays text, no script runs). The page opens at the
// newest message.
func TestBrowserTranscriptRendering(t *testing.T) {
	f := newFixture(t)
	const key = "agent:main:group:render"
	f.stack.Put(&sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), UpdatedAt: time.Now().UnixMilli()})
	filler := []map[string]any{}
	for i := 0; i < 40; i++ {
		filler = append(filler, map[string]any{"role": "user", "content": "filler line to make the transcript scroll"})
	}
	entries := append(filler,
		map[string]any{"role": "user", "content": "before <<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nsecret orchestration note\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>> after"},
		map[string]any{"type": "compaction", "id": "cmp-1", "summary": "the summary of what came before", "tokensBefore": 1234},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "calling a tool"},
			map[string]any{"type": "toolCall", "id": "c1", "name": "web_search", "arguments": map[string]any{"q": "weather"}},
		}},
		map[string]any{"role": "toolResult", "toolCallId": "c1", "toolName": "web_search", "content": []any{map[string]any{"type": "text", "text": "sunny and warm"}}},
		map[string]any{"role": "assistant", "content": "NO_REPLY"},
		map[string]any{"role": "assistant", "content": "**bold** and `code` and [bad](javascript:window.pwned=9) and [good](https://example.com/)\n\n```go\nfmt.Println(\"<script>window.pwned=1</script>\")\n```\n<img src=x onerror=\"window.pwned=2\">",
			"usage": map[string]any{"input": 11, "output": 7, "totalTokens": 18}},
	)
	var raw [][]byte
	for _, e := range entries {
		b, _ := json.Marshal(e)
		raw = append(raw, b)
	}
	if _, err := f.stack.Worker.Deps.Transcripts.Append(context.Background(), bus.EncodeKey(key), raw...); err != nil {
		t.Fatal(err)
	}
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	do(t, ctx, "open the transcript",
		chromedp.Evaluate[chromedp.Void](hash("session", key)+"; 1"),
		waitFor(`() => !!document.querySelector('#transcript pre.md-code')`))
	shot(t, ctx, "rendered")
	checks := map[string]string{
		"internal context folded under its label": `(() => { const d = document.querySelector('#transcript details.internal-context'); return !!d && !d.open && d.querySelector('summary').textContent === 'internal context' && d.textContent.includes('secret orchestration note') && !d.textContent.includes('<<<'); })()`,
		"the text around it shown":                `[...document.querySelectorAll('#transcript .msg .text')].some(e => e.textContent.includes('before') && e.textContent.includes('after'))`,
		"compaction a divider, summary on demand": `(() => { const c = document.querySelector('#transcript .compaction'); const d = c && c.querySelector('details'); return !!d && !d.open && d.textContent.includes('the summary of what came before') && !c.closest('.msg'); })()`,
		"tool call folded under its name":         `(() => { const d = document.querySelector('#transcript details.tool-call'); return !!d && !d.open && d.querySelector('summary').textContent.includes('web_search') && d.textContent.includes('weather'); })()`,
		"tool result folded under its name":       `(() => { const d = document.querySelector('#transcript details.tool-result'); return !!d && !d.open && d.querySelector('summary').textContent.includes('web_search') && d.textContent.includes('sunny and warm'); })()`,
		"no silent reply":                         `![...document.querySelectorAll('#transcript')].some(e => e.textContent.includes('NO_REPLY'))`,
		"markdown as elements":                    `!!document.querySelector('#transcript strong') && !!document.querySelector('#transcript .text p code')`,
		"a safe link is a link":                   `[...document.querySelectorAll('#transcript a.md-link')].some(a => a.href === 'https://example.com/')`,
		"a javascript: link stays text":           `![...document.querySelectorAll('#transcript a')].some(a => a.href.startsWith('javascript:')) && document.querySelector('#transcript').textContent.includes('javascript:window.pwned=9')`,
		"markup in a code block is text":          `document.querySelector('#transcript pre.md-code').textContent.includes('<script>window.pwned=1</script>')`,
		"markup outside is text":                  `document.querySelector('#transcript').textContent.includes('<img src=x onerror="window.pwned=2">')`,
		"no element made from the text":           `document.querySelectorAll('#main img, #main script, #main iframe').length === 0`,
		"usage per message":                       `[...document.querySelectorAll('#transcript .msg .usage')].some(e => e.textContent.includes('11 in / 7 out'))`,
		"time per message":                        `document.querySelectorAll('#transcript .msg .at').length > 40`,
		"opened at the newest message":            `(() => { const t = document.querySelector('#transcript'); return t.scrollHeight > t.clientHeight && t.scrollHeight - t.scrollTop - t.clientHeight < 5; })()`,
		"nothing ran":                             `window.pwned === undefined`,
	}
	for what, js := range checks {
		if !eval[bool](t, ctx, js) {
			t.Errorf("%s: false", what)
		}
	}
}

// A run id on the session page links to the session's timeline of that
// run: its steps from the runs bucket, its prompt and its model reply
// from the transcript, as `sessionbus replay` reads them. A token login
// has none.
func TestBrowserTimeline(t *testing.T) {
	f := newFixture(t)
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	do(t, ctx, "open a run's timeline from the session page",
		chromedp.Evaluate[chromedp.Void](hash("session", mainKey)+"; 1"),
		waitFor(`() => !!document.querySelector('#runs tr.run a')`),
		press(`#runs tr.run a`),
		waitFor(`() => document.querySelectorAll('#timeline tr[data-kind="model reply"]').length === 1`))
	shot(t, ctx, "timeline")
	kinds := eval[string](t, ctx, `[...document.querySelectorAll('#timeline tr')].map(r => r.dataset.kind).join(',')`)
	for _, k := range []string{"created", "started", "ok", "user", "model reply"} {
		if !strings.Contains(","+kinds+",", ","+k+",") {
			t.Fatalf("the run's timeline has %q, no %q", kinds, k)
		}
	}
	if n := eval[int](t, ctx, `new Set([...document.querySelectorAll('#timeline tr')].map(r => r.dataset.run)).size`); n != 1 {
		t.Fatalf("a run's timeline shows %d runs", n)
	}
	hc := f.client("")
	if code, body := f.do(hc, "POST", "/api/login", map[string]any{"token": f.stack.Token(bus.Caller{SessionKey: mainKey})}, false); code != 200 {
		t.Fatalf("token login: %d %s", code, body)
	}
	if code, _ := f.do(hc, "GET", "/api/timeline?key="+mainKey, nil, false); code != 403 {
		t.Fatalf("a token login's timeline: %d, want 403", code)
	}
}
