package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/ops/console"
)

// The sessions page's memory in the browser at 100,000 sessions, against
// the same page at a handful: the list is paged from the server, so the
// page holds one page of rows at any size. The figures (the JS heap after
// a garbage collection, the DOM's nodes, and the time from the page's
// load to its first row, console_first_paint_100k) are logged and written to
// $SESSIONBUS_ARTIFACTS/console-memory.json. It takes a minute or more, so
// it runs with SESSIONBUS_BROWSER_100K=1 (.ci/run sets it).
// maxHeap100k bounds the sessions page's JS heap at 100,000 sessions.
const maxHeap100k = 5e6

func TestBrowserMemory100k(t *testing.T) {
	if os.Getenv("SESSIONBUS_BROWSER_100K") == "" {
		t.Skip("set SESSIONBUS_BROWSER_100K=1 to measure the sessions page at 100,000 sessions")
	}
	const n = 100_000
	// the console on a connection of its own: the 100,000 writes' watch
	// traffic is then not queued behind the worker's
	f := newFixtureWith(t, func(s *handlerstest.Stack, o *console.Options) {
		o.Conn, _ = bustest.Connect(t, s.Server)
	})
	ctx := tab(t)
	f.login(t, ctx, auth.RoleAdmin)
	small := pageMemory(t, ctx, f)
	putSessions(t, f, n)
	t.Log("published; waiting for the console's index")
	ops := f.client(f.credsText(auth.RoleOps))
	bustest.WaitFor(t, 10*time.Minute, "the console's index at "+strconv.Itoa(n)+" sessions", func() bool {
		var p struct{ Total int }
		res, err := ops.Get(f.c.URL() + "api/sessions?limit=1")
		if err != nil {
			return false // a loaded machine: ask again
		}
		defer res.Body.Close()
		return res.StatusCode == 200 && json.NewDecoder(res.Body).Decode(&p) == nil && p.Total >= n
	})
	t.Log("indexed")
	// first paint: from the page's load to its first row drawn, the time a
	// person waits for the sessions page at 100,000 sessions (login check,
	// the first page of rows from the server, and the drawing); polled on
	// each change of the DOM, so it is read when the row appears
	do(t, ctx, "reload", chromedp.Reload(),
		chromedp.PollFunction[chromedp.Void](`() => { const ok = document.querySelectorAll('tr.session-row').length > 0; if (ok && !window.firstRowAt) window.firstRowAt = performance.now(); return ok; }`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(time.Minute)))
	firstPaint := eval[float64](t, ctx, `window.firstRowAt`)
	large := pageMemory(t, ctx, f)
	shot(t, ctx, "sessions-100k")
	out := map[string]any{"sessions": n, "small": small, "at100k": large, "console_first_paint_100k_ms": firstPaint}
	b, _ := json.MarshalIndent(out, "", "  ")
	t.Logf("sessions page memory: %s", b)
	if dir := os.Getenv("SESSIONBUS_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "console-memory.json"), b, 0o644)
		}
	}
	// the page holds one page of rows, whatever the number of sessions
	if large["rows"] != 50 {
		t.Fatalf("the page at %d sessions shows %v rows, want one page of 50", n, large["rows"])
	}
	if heap := large["JSHeapUsedSize"]; heap >= maxHeap100k {
		t.Fatalf("the page's JS heap at %d sessions: %.2f MB, over its bound of %.0f MB", n, heap/1e6, maxHeap100k/1e6)
	}
}

// pageMemory opens the sessions page, waits for its rows, collects
// garbage and reads the JS heap and DOM node counts.
func pageMemory(t *testing.T, ctx context.Context, f *fixture) map[string]float64 {
	t.Helper()
	do(t, ctx, "the sessions page",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/sessions'; 1`),
		waitFor(`() => document.querySelectorAll('tr.session-row').length > 0`))
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := chromedp.Run(c, func(ctx context.Context, tg *chromedp.Target) (map[string]float64, error) {
		if _, err := cdp.Call(ctx, tg, performance.Enable, performance.EnableParams{}); err != nil {
			return nil, err
		}
		if _, err := cdp.Call(ctx, tg, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
			return nil, err
		}
		res, err := cdp.Call(ctx, tg, performance.GetMetrics, cdp.Empty{})
		if err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for _, x := range res.Metrics {
			switch x.Name {
			case "JSHeapUsedSize", "JSHeapTotalSize", "Nodes":
				out[x.Name] = x.Value
			}
		}
		return out, nil
	})
	if err != nil {
		t.Fatalf("read the page's memory: %v", err)
	}
	m["rows"] = float64(eval[int](t, ctx, `document.querySelectorAll('tr.session-row').length`))
	return m
}

// putSessions writes n sample entries straight to the sessions bucket.
func putSessions(t *testing.T, f *fixture, n int) {
	t.Helper()
	nc, _ := bustest.Connect(t, f.stack.Server)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		t.Fatal(err)
	}
	names := bus.NewNames(f.stack.Config.Bus.Prefix)
	subj := "$KV." + names.SessionsBucket() + "."
	now := time.Now().Add(-time.Hour).UnixMilli()
	for i := range n {
		e := sessions.Sample(i, now)
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, err = js.PublishAsync(subj+bus.EncodeKey(e.Key), data)
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				break
			}
			<-js.PublishAsyncComplete()
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%20000 == 0 {
			t.Logf("%d sessions published", i)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		t.Fatalf("%d publishes not acknowledged", js.PublishAsyncPending())
	}
}
