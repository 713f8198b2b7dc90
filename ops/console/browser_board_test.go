package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/ops/console"
)

// The board is the tree: a grandchild's child sits under its parent,
// which sits under its own, each row with its depth, tokens, cost and
// whether a turn runs; Steer on the deepest node is accepted and said in
// the success style, and Kill on the middle node ends it and what runs
// below it.
func TestBrowserBoardTree(t *testing.T) {
	f := newFixtureWith(t, func(_ *handlerstest.Stack, o *console.Options) {
		o.Price = func(string) config.ModelCost { return config.ModelCost{Input: 3, Output: 15} }
	})
	ctx := tab(t)
	one := f.spawn("level one", "one")
	two := f.spawnUnder(one, "level two", "two")
	three := f.spawnUnder(two, "level three", "three")
	uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := f.stack.Worker.Deps.Store.Update(uctx, three, func(e *sessions.Entry) error {
		e.InputTokens, e.OutputTokens, e.TotalTokens = 100_000, 20_000, 120_000
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.login(t, ctx, auth.RoleAdmin)
	row := `(k, s) => document.querySelector('tr.board-row[data-key="' + k + '"]')?.dataset.status === s`
	do(t, ctx, "open the board",
		chromedp.Evaluate[chromedp.Void](hash("board", mainKey)+"; window.sessionbusNoConfirm = true; window.prompt = () => 'focus on the tests'; 1"),
		waitFor(row, one, "running"), waitFor(row, two, "running"), waitFor(row, three, "running"),
		// $0.60 = 100k in at $3/M + 20k out at $15/M
		waitFor(`(k) => (document.querySelector('tr.board-row[data-key="' + k + '"]')?.textContent || '').includes('$0.60')`, three))
	shot(t, ctx, "board-tree")
	type node struct {
		Key, Parent string
		Depth       int
		Indent      float64
		Live        string
	}
	rows := eval[[]node](t, ctx, `[...document.querySelectorAll('tr.board-row')].map(r => ({Key: r.dataset.key, Parent: r.dataset.parent, Depth: +r.dataset.depth, Live: r.dataset.live, Indent: parseFloat(getComputedStyle(r.cells[0]).paddingLeft)}))`)
	want := []struct {
		key, parent string
		depth       int
	}{{one, mainKey, 1}, {two, one, 2}, {three, two, 3}}
	if len(rows) != len(want) {
		t.Fatalf("board rows %+v, want 3", rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.Key != w.key || r.Parent != w.parent || r.Depth != w.depth {
			t.Errorf("row %d: %+v, want %s under %s at depth %d", i, r, w.key, w.parent, w.depth)
		}
		if i > 0 && r.Indent <= rows[i-1].Indent {
			t.Errorf("row %d is not indented below its parent: %v px after %v px", i, r.Indent, rows[i-1].Indent)
		}
		if r.Live != "1" {
			t.Errorf("row %d: a running turn not marked live", i)
		}
	}
	if got := eval[string](t, ctx, `document.querySelector('#board-summary').textContent`); !containsAll(got, "3 sub-agents", "depth 3") {
		t.Errorf("board summary %q", got)
	}
	do(t, ctx, "steer the deepest node",
		press(`tr.board-row[data-key="`+three+`"] button.steer`),
		waitFor(`() => { const m = document.querySelector('#board-message'); return m.className === 'success' && m.textContent.startsWith('steer'); }`))
	shot(t, ctx, "board-steered")
	do(t, ctx, "kill the middle node",
		press(`tr.board-row[data-key="`+two+`"] button.kill`),
		waitFor(row, two, "killed"), waitFor(row, three, "killed"), waitFor(row, one, "running"))
	f.finish("one")
	do(t, ctx, "the top node ends", waitFor(row, one, "done"))
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
