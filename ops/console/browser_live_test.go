package console_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// A page opened while a turn runs shows the turn from its first delta,
// not from whatever comes after it opened; what follows is appended, and
// the box empties when the turn ends.
func TestBrowserLiveFromFirstDelta(t *testing.T) {
	f := newFixture(t)
	child := f.spawn("talkative", "talkative")
	names := bus.NewNames(f.stack.Config.Bus.Prefix)
	subject := names.Live(bus.EncodeKey(child))
	seq := uint64(0)
	send := func(ev bus.LiveEvent) {
		t.Helper()
		seq++
		ev.RunID, ev.Seq = "run-live-test", seq
		b, _ := json.Marshal(ev)
		if err := f.stack.Conn.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
		if err := f.stack.Conn.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// an earlier turn that ended: nothing of it is shown
	send(bus.LiveEvent{Type: bus.LiveText, Delta: "an old turn"})
	send(bus.LiveEvent{Type: bus.LiveDone})
	seq = 0
	send(bus.LiveEvent{Type: bus.LiveText, Delta: "FIRST delta, "})
	send(bus.LiveEvent{Type: bus.LiveToolCall, Tool: "sessions_list"})
	send(bus.LiveEvent{Type: bus.LiveText, Delta: "second delta"})
	ctx := tab(t)
	f.login(t, ctx, auth.RoleOps)
	do(t, ctx, "open the page mid-turn",
		chromedp.Evaluate[chromedp.Void](hash("session", child)+"; 1"),
		waitFor(`() => { const t = document.querySelector('#live')?.textContent || ''; return t.startsWith('FIRST delta, ') && t.includes('[tool call sessions_list]') && t.endsWith('second delta'); }`))
	if got := eval[string](t, ctx, `document.querySelector('#live').textContent`); containsAll(got, "an old turn") {
		t.Fatalf("the live box shows an ended turn: %q", got)
	}
	send(bus.LiveEvent{Type: bus.LiveText, Delta: " and a third"})
	do(t, ctx, "a delta after the page opened", waitFor(`() => document.querySelector('#live').textContent.endsWith('second delta and a third')`))
	shot(t, ctx, "live-mid-turn")
	send(bus.LiveEvent{Type: bus.LiveDone})
	do(t, ctx, "the turn ended", waitFor(`() => { const l = document.querySelector('#live'); return l.dataset.state === 'done' && l.textContent === ''; }`))
	f.finish("talkative")
}
