package webhook_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/client/webhook"
)

// send POSTs body to /inbound with exactly the headers h, as an attacker
// replaying a captured request does.
func send(t *testing.T, url string, body []byte, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+webhook.InboundPath, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// signedAt is the headers of body signed at ts by the documented format.
func signedAt(ts int64, body []byte) http.Header {
	req, _ := http.NewRequest(http.MethodPost, "http://x", nil)
	signReq(req, ts, body)
	return req.Header
}

// userTurns counts the user turns of session key with text in its
// transcript, read through the bus.
func userTurns(t *testing.T, st interface {
	MustCall(as, tool, params string) map[string]any
}, key, text string) int {
	t.Helper()
	res := st.MustCall(key, "sessions_history", `{"sessionKey":"current","limit":100}`)
	msgs, _ := res["messages"].([]any)
	n := 0
	for _, m := range msgs {
		m, _ := m.(map[string]any)
		if m["role"] == "user" && strings.Contains(fmt.Sprint(m["content"]), text) {
			n++
		}
	}
	return n
}

// TestInboundReplay: a signed POST captured and sent again inside the
// timestamp's window, byte for byte or with its signature's hex in upper
// case, is answered as a repeat of the first (its run id, "repeat":true)
// and starts no run: the session's transcript has the message once and
// its reply is delivered once, while a later message runs as usual.
func TestInboundReplay(t *testing.T) {
	st := stack(t)
	rcv := newReceiver(t)
	a := adapter(t, st, "web", webhook.Options{Secret: secret, DeliverURL: rcv.URL})
	start(t, a)
	web := httptest.NewServer(a.Handler())
	defer web.Close()

	body := mustJSON(map[string]any{"from": "77", "text": "hello replay"})
	captured := signedAt(time.Now().Unix(), body)
	status, first := send(t, web.URL, body, captured)
	if status != http.StatusAccepted || strings.Contains(first, `"repeat"`) {
		t.Fatalf("first POST: %d %s", status, first)
	}
	upper := captured.Clone()
	upper.Set(webhook.HeaderSignature, "sha256="+strings.ToUpper(strings.TrimPrefix(captured.Get(webhook.HeaderSignature), "sha256=")))
	for i, h := range []http.Header{captured, captured, upper} {
		status, text := send(t, web.URL, body, h)
		if status != http.StatusAccepted || runID(t, text) != runID(t, first) || !strings.Contains(text, `"repeat":true`) {
			t.Fatalf("replay %d: %d %s, want 202 repeating run %s", i, status, text, runID(t, first))
		}
	}
	// a later message of the session runs after any run the replays
	// could have queued, so once its reply is in, theirs would be too
	if status, text := post(t, web.URL, mustJSON(map[string]any{"from": "77", "text": "hello after"}), true); status != http.StatusAccepted {
		t.Fatalf("later message: %d %s", status, text)
	}
	bustest.WaitFor(t, time.Minute, "the later message's reply", func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		for _, tk := range rcv.taken {
			if tk.d.Message == "hi after" {
				return true
			}
		}
		return false
	})
	rcv.mu.Lock()
	replies := 0
	for _, tk := range rcv.taken {
		if tk.d.Message == "hi replay" {
			replies++
		}
	}
	rcv.mu.Unlock()
	key := "agent:main:web:direct:77"
	if turns := userTurns(t, st, key, "hello replay"); turns != 1 || replies != 1 {
		t.Fatalf("the replayed message is %d times in the transcript and its reply was delivered %d times, want 1 and 1", turns, replies)
	}
	if turns := userTurns(t, st, key, "hello after"); turns != 1 {
		t.Fatalf("the later message is %d times in the transcript", turns)
	}
}

// TestInboundTimestamp: a request signed too long ago or too far ahead,
// one whose timestamp was changed after signing, one without a timestamp
// (signed over the body alone, as before timestamps) or with one that is
// not a number is refused with a 401 that says what was wrong, and writes
// nothing anywhere: no run starts. One signed 4 minutes either way of
// the adapter's clock is taken.
func TestInboundTimestamp(t *testing.T) {
	st := stack(t)
	_, js := bustest.Connect(t, st.Server)
	web := httptest.NewServer(adapter(t, st, "web", webhook.Options{Secret: secret}).Handler())
	defer web.Close()
	legacy := httptest.NewServer(adapter(t, st, "web", webhook.Options{Secret: secret, LegacySignatures: true}).Handler())
	defer legacy.Close()

	body := mustJSON(map[string]any{"from": "88", "text": "hello late"})
	now := time.Now().Unix()
	tampered := signedAt(now-10*60, body)
	tampered.Set(webhook.HeaderTimestamp, strconv.FormatInt(now, 10))
	bodyOnly := http.Header{}
	bodyOnly.Set(webhook.HeaderSignature, hmacHex(string(body)))
	notNumber := signedAt(now, body)
	notNumber.Set(webhook.HeaderTimestamp, "soon")
	notNumber.Set(webhook.HeaderSignature, hmacHex("soon."+string(body)))
	cases := []struct {
		name string
		url  string
		h    http.Header
		text string
	}{
		{"ten minutes old", web.URL, signedAt(now-10*60, body), "stale X-Sessionbus-Timestamp"},
		{"just over five minutes old", web.URL, signedAt(now-5*60-3, body), "stale X-Sessionbus-Timestamp"},
		{"ten minutes ahead", web.URL, signedAt(now+10*60, body), "after the receiver's clock"},
		{"a year ahead", web.URL, signedAt(now+365*24*3600, body), "after the receiver's clock"},
		{"timestamp changed after signing", web.URL, tampered, "bad X-Sessionbus-Signature"},
		{"no timestamp, body-only signature", web.URL, bodyOnly, "missing X-Sessionbus-Timestamp"},
		{"timestamp not a number", web.URL, notNumber, `bad X-Sessionbus-Timestamp "soon"`},
		// the legacy opt-in takes body-only signatures, not old timestamps
		{"legacy adapter, ten minutes old", legacy.URL, signedAt(now-10*60, body), "stale X-Sessionbus-Timestamp"},
		{"legacy adapter, timestamp changed after signing", legacy.URL, tampered, "bad X-Sessionbus-Signature"},
	}
	before := streamSeqs(t, js)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, text := send(t, c.url, body, c.h)
			if status != http.StatusUnauthorized || !strings.Contains(text, c.text) {
				t.Fatalf("status %d %q, want 401 with %q", status, text, c.text)
			}
		})
	}
	for name, seq := range streamSeqs(t, js) {
		if before[name] != seq {
			t.Errorf("stream %s went from seq %d to %d: a refused request wrote", name, before[name], seq)
		}
	}
	for i, ts := range []int64{now - 4*60, now + 4*60} {
		b := mustJSON(map[string]any{"from": "88", "text": fmt.Sprint("hello in window ", i)})
		if status, text := send(t, web.URL, b, signedAt(ts, b)); status != http.StatusAccepted {
			t.Fatalf("signed %ds from now: %d %s", ts-now, status, text)
		}
	}
	if status, text := send(t, legacy.URL, body, bodyOnly); status != http.StatusAccepted {
		t.Fatalf("legacy adapter, body-only signature: %d %s", status, text)
	}
}

// TestDeliverySignature: a delivery carries X-Sessionbus-Timestamp, the
// Unix seconds of its POST, and a signature over that timestamp, "." and
// the body, which webhook.Verify and webhook.CheckTimestamp take; with
// LegacySignatures it carries the body-only signature and no timestamp,
// as receivers not yet migrated check it.
func TestDeliverySignature(t *testing.T) {
	st := stack(t)
	type got struct {
		h    http.Header
		body []byte
	}
	posts := make(chan got, 2)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		posts <- got{r.Header.Clone(), b}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	for _, legacy := range []bool{false, true} {
		a := adapter(t, st, fmt.Sprint("web", legacy), webhook.Options{Secret: secret, DeliverURL: hook.URL, LegacySignatures: legacy})
		d, err := a.Start(bustest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		web := httptest.NewServer(a.Handler())
		before := time.Now().Unix()
		status, text := post(t, web.URL, mustJSON(map[string]any{"from": "5", "text": "hello signed"}), true)
		if status != http.StatusAccepted {
			t.Fatalf("legacy %v: %d %s", legacy, status, text)
		}
		var p got
		select {
		case p = <-posts:
		case <-time.After(time.Minute):
			t.Fatalf("legacy %v: no delivery within a minute", legacy)
		}
		web.Close()
		d.Stop()
		ts, sig := p.h.Get(webhook.HeaderTimestamp), p.h.Get(webhook.HeaderSignature)
		if legacy {
			if ts != "" || sig != hmacHex(string(p.body)) {
				t.Fatalf("legacy delivery: timestamp %q, signature %q, want none and the body's %q", ts, sig, hmacHex(string(p.body)))
			}
			continue
		}
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || n < before || n > time.Now().Unix() {
			t.Fatalf("delivery timestamp %q, want the Unix seconds of the POST (between %d and now)", ts, before)
		}
		if !strings.Contains(string(p.body), `"message":"hi signed"`) || sig != hmacHex(ts+"."+string(p.body)) ||
			!webhook.Verify(secret, ts, p.body, sig) || webhook.CheckTimestamp(ts, time.Now()) != nil {
			t.Fatalf("delivery %s: signature %q over timestamp %s does not verify", p.body, sig, ts)
		}
		if webhook.Verify(secret, strconv.FormatInt(n+1, 10), p.body, sig) {
			t.Fatal("the delivery's signature verifies with another timestamp")
		}
	}
}
