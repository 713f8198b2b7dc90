package webhook_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/client/webhook"
	"github.com/sessionbus/sessionbus/ops/inspect"
	"github.com/sessionbus/sessionbus/streams/deadletters"
)

// streamSeqs is every stream's last sequence but the claims bucket's,
// where the gateway's maintenance lease is taken on its own clock.
func streamSeqs(t *testing.T, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	l := js.ListStreams(bustest.Context(t))
	for si := range l.Info() {
		if si.Config.Name != "KV_claims" {
			out[si.Config.Name] = si.State.LastSeq
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInboundBadInput: each bad POST on /inbound gets its status and a
// line saying what was wrong, and nothing is written to any stream or
// bucket; a good one is accepted with its routed session.
func TestInboundBadInput(t *testing.T) {
	st := stack(t)
	_, js := bustest.Connect(t, st.Server)
	web := httptest.NewServer(adapter(t, st, "web", webhook.Options{Secret: secret}).Handler())
	defer web.Close()
	wa := httptest.NewServer(adapter(t, st, "whatsapp", webhook.Options{}).Handler())
	defer wa.Close()
	// an adapter whose token is for another channel: its own mistake
	slackTok := st.Token(bus.Caller{Adapter: "slack"})
	other := httptest.NewServer(adapter(t, st, "web", webhook.Options{Token: func() (string, error) { return slackTok, nil }}).Handler())
	defer other.Close()

	long := strings.Repeat("p", 250)
	cases := []struct {
		name   string
		url    string
		body   string
		sign   bool
		raw    bool // body as is, not signed
		status int
		text   string
	}{
		{"no sender", web.URL, `{"text":"hello x"}`, true, false, 400, "from required"},
		{"blank sender", web.URL, `{"from":"  ","text":"hello x"}`, true, false, 400, "from required"},
		{"no text", web.URL, `{"from":"1"}`, true, false, 400, "text required"},
		{"another channel", web.URL, `{"channel":"slack","from":"1","text":"hello x"}`, true, false, 400, `channel "slack" is not this adapter's channel "web"`},
		{"unknown chat type", web.URL, `{"from":"1","chatType":"room","text":"hello x"}`, true, false, 400, `chatType "room" is unknown`},
		{"thread on a threadless channel", wa.URL, `{"from":"1","thread":"t1","text":"hello x"}`, false, false, 400, "threadId given, but channel whatsapp has no threads"},
		{"over-long peer id", web.URL, `{"from":"` + long + `","text":"hello x"}`, true, false, 400, "over the 256 a key may have"},
		{"no signature", web.URL, `{"from":"1","text":"hello x"}`, false, false, 401, "missing X-Sessionbus-Signature"},
		{"bad signature", web.URL, `{"from":"1","text":"hello x"}`, false, true, 401, "bad X-Sessionbus-Signature"},
		{"body too large", web.URL, `{"from":"1","text":"` + strings.Repeat("a", webhook.MaxInboundBody) + `"}`, true, false, 413, "body is over 262144 bytes"},
		{"bad JSON", web.URL, `{"from":"1",`, true, false, 400, "invalid JSON"},
		{"unknown field", web.URL, `{"from":"1","txt":"hello x"}`, true, false, 400, `unknown field "txt"`},
		{"two values", web.URL, `{"from":"1","text":"a"}{}`, true, false, 400, "more than one value"},
		{"short and long name differ", web.URL, `{"from":"1","text":"a","group":"g1","groupId":"g2"}`, true, false, 400, "group and groupId differ"},
		{"token for another channel", other.URL, `{"from":"1","text":"hello x"}`, false, false, 502, "the bus refused this adapter"},
	}
	before := streamSeqs(t, js)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, c.url+webhook.InboundPath, strings.NewReader(c.body))
			switch {
			case c.sign:
				signReq(req, time.Now().Unix(), []byte(c.body))
			case c.raw:
				ts := strconv.FormatInt(time.Now().Unix(), 10)
				req.Header.Set(webhook.HeaderTimestamp, ts)
				req.Header.Set(webhook.HeaderSignature, webhook.Sign([]byte("another secret"), ts, []byte(c.body)))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			text := string(b)
			if resp.StatusCode != c.status || !strings.Contains(text, c.text) {
				t.Fatalf("status %d %q, want %d with %q", resp.StatusCode, text, c.status, c.text)
			}
		})
	}
	if resp, err := http.Get(web.URL + webhook.InboundPath); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /inbound: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	after := streamSeqs(t, js)
	for name, seq := range after {
		if before[name] != seq {
			t.Errorf("stream %s went from seq %d to %d: a refused message wrote", name, before[name], seq)
		}
	}
	status, text := post(t, web.URL, mustJSON(map[string]any{"from": "42", "text": "hello you", "idempotencyKey": "m1"}), true)
	if status != http.StatusAccepted || !strings.Contains(text, `"sessionKey":"agent:main:web:direct:42"`) || !strings.Contains(text, `"created":true`) {
		t.Fatalf("good message: %d %s", status, text)
	}
}

// TestDeliveriesRetriedInOrder: while the receiver answers 500, every
// reply waits and is retried; once it recovers each reply is taken once,
// signed, under its run's delivery id, and in the order of its session's
// messages, with several sessions' replies in flight at once.
func TestDeliveriesRetriedInOrder(t *testing.T) {
	st := stack(t)
	_, js := bustest.Connect(t, st.Server)
	rcv := newReceiver(t)
	rcv.failing.Store(true)
	a := adapter(t, st, "web", webhook.Options{Secret: secret, DeliverURL: rcv.URL, MaxInFlight: 8,
		Backoff: 20 * time.Millisecond, Attempts: 1000, AckWait: 3 * time.Second, Timeout: time.Second})
	start(t, a)
	web := httptest.NewServer(a.Handler())
	defer web.Close()

	const peers, each = 4, 10
	runs := map[string]string{} // run id -> the text it answers
	for i := range each {
		for p := range peers {
			status, text := post(t, web.URL, mustJSON(map[string]any{"from": fmt.Sprint("peer", p), "text": fmt.Sprintf("hello %d-%d", p, i)}), true)
			if status != http.StatusAccepted {
				t.Fatalf("message %d-%d: %d %s", p, i, status, text)
			}
			runs[runID(t, text)] = fmt.Sprintf("hi %d-%d", p, i)
		}
	}
	// every reply is in SB_DELIVER and the receiver has refused a few
	bustest.WaitFor(t, time.Minute, "every reply published while the receiver fails", func() bool {
		info, err := js.Stream(bustest.Context(t), "SB_DELIVER")
		if err != nil {
			return false
		}
		i, err := info.Info(bustest.Context(t))
		return err == nil && i.State.Msgs == peers*each && rcv.refused.Load() >= 2*peers
	})
	rcv.failing.Store(false)
	bustest.WaitFor(t, time.Minute, "every reply taken after the receiver recovered", func() bool { return rcv.distinct() == peers*each })

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.badSig != 0 {
		t.Errorf("%d POSTs with a bad signature", rcv.badSig)
	}
	next := map[string]int{} // per peer, the next message index
	for _, tk := range rcv.taken {
		runID, ok := strings.CutSuffix(tk.id, ":reply")
		if !ok || runs[runID] != tk.d.Message || rcv.takenIDs[tk.id] != 1 {
			t.Fatalf("delivery %s (taken %d times): %+v, want the reply %q", tk.id, rcv.takenIDs[tk.id], tk.d, runs[runID])
		}
		var p, i int
		if _, err := fmt.Sscanf(tk.d.Message, "hi %d-%d", &p, &i); err != nil {
			t.Fatal(err)
		}
		if peer := fmt.Sprint("peer", p); i != next[peer] || tk.d.To != peer {
			t.Fatalf("peer%d's reply %d taken when %d was due (to %q)", p, i, next[peer], tk.d.To)
		}
		next[fmt.Sprint("peer", p)]++
	}
}

// TestDeadLetter: a delivery the receiver refuses every time is posted
// --attempts times, then recorded in SB_DEADLETTER (by the channel
// adapter role) and acked; inspect lists it.
func TestDeadLetter(t *testing.T) {
	st := stack(t)
	_, js := bustest.Connect(t, st.Server)
	rcv := newReceiver(t)
	rcv.failing.Store(true)
	a := adapter(t, st, "web", webhook.Options{Secret: secret, DeliverURL: rcv.URL, Attempts: 3, Backoff: 10 * time.Millisecond})
	start(t, a)
	web := httptest.NewServer(a.Handler())
	defer web.Close()
	status, text := post(t, web.URL, mustJSON(map[string]any{"from": "7", "text": "hello dead"}), true)
	if status != http.StatusAccepted {
		t.Fatalf("%d %s", status, text)
	}
	id := runID(t, text) + ":reply"
	names := bus.NewNames("")
	var dl []deadletters.Entry
	bustest.WaitFor(t, time.Minute, "the dead letter", func() bool {
		var err error
		dl, err = deadletters.Last(bustest.Context(t), js, names, 10)
		return err == nil && len(dl) == 1
	})
	d := dl[0]
	if d.DeliveryID != id || d.Channel != "web" || d.SessionKey != "agent:main:web:direct:7" || d.Attempts != 3 || d.LastStatus != 500 ||
		!strings.Contains(d.LastError, "receiver down") || !strings.Contains(string(d.Delivery), `"message":"hi dead"`) || d.URL != rcv.URL {
		t.Fatalf("dead letter %+v (delivery %s)", d, d.Delivery)
	}
	bustest.WaitFor(t, time.Minute, "the dead delivery acked", func() bool {
		c, err := js.Consumer(bustest.Context(t), "SB_DELIVER", "web")
		if err != nil {
			return false
		}
		ci, err := c.Info(bustest.Context(t))
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	})
	if n := rcv.refused.Load(); n != 3 {
		t.Fatalf("%d POSTs, want 3", n)
	}
	rep, err := inspect.Read(bustest.Context(t), js, inspect.Options{Names: names})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if rep.DeadLetterCount != 1 || !strings.Contains(out.String(), "DEAD LETTERS (1)") || !strings.Contains(out.String(), id) {
		t.Fatalf("inspect: %d dead letters\n%s", rep.DeadLetterCount, out.String())
	}
}

func runID(t *testing.T, accepted string) string {
	t.Helper()
	_, rest, ok := strings.Cut(accepted, `"runId":"`)
	id, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 || id == "" {
		t.Fatalf("no run id in %s", accepted)
	}
	return id
}

// TestStopHandsDeliveriesOver: an adapter stopped while it retries a
// delivery hands it back at once, and another adapter of the channel
// delivers it long before the ack wait (10 minutes) would have.
func TestStopHandsDeliveriesOver(t *testing.T) {
	st := stack(t)
	rcv := newReceiver(t)
	rcv.failing.Store(true)
	failed := &countLog{msg: "webhook adapter: POST failed"}
	o := webhook.Options{Secret: secret, DeliverURL: rcv.URL, Attempts: 1000, Backoff: 10 * time.Minute, AckWait: 10 * time.Minute, Timeout: time.Second,
		Log: slog.New(failed)}
	first := adapter(t, st, "web", o)
	d, err := first.Start(bustest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(first.Handler())
	defer web.Close()
	if status, text := post(t, web.URL, mustJSON(map[string]any{"from": "9", "text": "hello over"}), true); status != http.StatusAccepted {
		t.Fatalf("%d %s", status, text)
	}
	// the adapter logs a failed POST, then waits to retry: stop it there
	bustest.WaitFor(t, time.Minute, "the first POST refused", func() bool { return failed.n.Load() == 1 })
	rcv.failing.Store(false)
	d.Stop()
	o.Log = nil
	start(t, adapter(t, st, "web", o))
	bustest.WaitFor(t, time.Minute, "the other adapter's delivery", func() bool { return rcv.distinct() == 1 })
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.taken[0].d.Message != "hi over" || rcv.badSig != 0 {
		t.Fatalf("taken %+v, %d bad signatures", rcv.taken, rcv.badSig)
	}
}

// countLog counts the log records with one message.
type countLog struct {
	msg string
	n   atomic.Int64
}

func (c *countLog) Enabled(context.Context, slog.Level) bool { return true }
func (c *countLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == c.msg {
		c.n.Add(1)
	}
	return nil
}
func (c *countLog) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countLog) WithGroup(string) slog.Handler      { return c }
