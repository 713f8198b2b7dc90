package console_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/ops/console"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// The sessions page marks the session waiting on a person and previews
// its last message as text (markup in it runs nothing); the operations
// page charts the bus's and the gateway's figures, and an admin restores
// an archive from it while an ops login sees no restore button and is
// refused one with 403.
func TestBrowserWaitingChartsRestore(t *testing.T) {
	f := newFixture(t)
	hostile := `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	f.chatAs(mainKey, "ping "+hostile)
	const doomed = "agent:main:group:doomed"
	f.stack.Put(&sessions.Entry{Key: doomed, AgentID: "main", SessionID: sessions.NewID(), UpdatedAt: time.Now().UnixMilli()})
	f.chatAs(doomed, "ping before the fall")
	admin := f.client(f.credsText(auth.RoleAdmin))
	if code, body := f.do(admin, "POST", "/api/session/delete", map[string]any{"key": doomed}, true); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	row := `tr.session-row[data-key="` + mainKey + `"]`
	do(t, ctx, "main marked waiting, its reply previewed",
		waitFor(`(s, h) => { const r = document.querySelector(s); return r && r.dataset.waiting === '1' && !!r.querySelector('.waiting-mark') && (r.querySelector('.preview-text')?.textContent || '').includes('pong: ping ' + h.slice(0, 40)); }`, row, hostile))
	shot(t, ctx, "sessions-waiting")
	if got := eval[string](t, ctx, `String(window.pwned)`); got != "undefined" {
		t.Fatalf("a preview's markup ran: window.pwned = %s", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#main img, #main script').length`); n != 0 {
		t.Fatalf("the previews made %d elements from their text", n)
	}
	chart := `(src, name) => !!document.querySelector('#charts .chart[data-source="' + src + '"][data-name="' + name + '"] svg polyline')`
	do(t, ctx, "the charts",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/ops'; window.sessionbusNoConfirm = true; 1`),
		waitFor(chart, console.BusSource, "sessionbus_run_queue_messages"),
		waitFor(chart, f.metricsAddr, "sessionbus_runs_in_flight"),
		// a counter is charted as a rate: from its second read on
		waitFor(chart, f.metricsAddr, "sessionbus_tool_requests_total"))
	restore := `button.archive-restore`
	do(t, ctx, "restore the archive",
		// found and clicked in one step: the page redraws its tables every
		// 5 s, and a node looked up before a redraw is gone at the click
		press(restore),
		waitFor(`() => document.querySelector('#ops-message')?.className === 'restored'`))
	shot(t, ctx, "ops-charts-restored")
	waitSignalWhere(t, f, doomed, func(ev signals.Event) bool {
		return ev.Payload["action"] == "restore" && ev.ActorID == "console:admin-test"
	})

	// the same page for an ops login: no restore button, and a forged
	// restore refused
	ops := tab(t)
	f.login(t, ops, auth.RoleOps)
	do(t, ops, "operations as ops",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/ops'; 1`),
		waitFor(`() => document.querySelectorAll('a.archive-download').length > 0`))
	if n := eval[int](t, ops, `document.querySelectorAll('button.archive-restore').length`); n != 0 {
		t.Fatalf("an ops login sees %d restore buttons", n)
	}
	status := eval[int](t, ops, `fetch('/api/archive/restore', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Sessionbus-Console': '1'}, body: JSON.stringify({id: document.querySelector('a.archive-download').href.split('id=')[1]})}).then(r => r.status)`)
	if status != 403 {
		t.Fatalf("a restore forged from an ops page: %d, want 403", status)
	}
}

// A console whose bus connection drops says so on the page, and once the
// bus is back it follows the sessions again without a reload.
func TestBrowserBusDown(t *testing.T) {
	var p *cutProxy
	f := newFixtureWith(t, func(s *handlerstest.Stack, o *console.Options) {
		p = newCutProxy(t, strings.TrimPrefix(s.Server.URL(), "nats://"))
		o.Conn, _ = bustest.ConnectURL(t, "nats://"+p.addr(), append(bustest.Options(t, s.Server.Deployment()),
			nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
	})
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	row := `tr.session-row[data-key="` + mainKey + `"]`
	do(t, ctx, "the sessions page",
		chromedp.Evaluate[chromedp.Void](`window.sameLoad = 1; 1`),
		waitFor(`(s) => !!document.querySelector(s)`, row),
		waitFor(`() => !document.querySelector('#bus').classList.contains('down')`))
	p.cut()
	do(t, ctx, "the page says the bus is gone",
		waitFor(`() => document.querySelector('#bus').classList.contains('down') && document.querySelector('#bus').textContent.includes('lost the bus')`))
	shot(t, ctx, "bus-down")
	p.heal()
	do(t, ctx, "the page says the bus is back",
		waitFor(`() => !document.querySelector('#bus').classList.contains('down')`))
	f.chatAs(mainKey, "ping after the outage")
	do(t, ctx, "the row follows the bus again",
		waitFor(`(s) => (document.querySelector(s + ' .preview-text')?.textContent || '').includes('pong: ping after the outage')`, row))
	if eval[int](t, ctx, `window.sameLoad || 0`) != 1 {
		t.Fatal("the page reloaded")
	}
}

// cutProxy forwards TCP to a NATS server until cut, which closes every
// connection and refuses new ones until heal.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
	}
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
