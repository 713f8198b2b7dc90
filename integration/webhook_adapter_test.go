package integration

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
)

// TestWebhookAdapterKill: 500 messages POSTed to two `adapter webhook`
// processes of one channel, run by a real `serve`, the first adapter
// SIGKILLed half way: every reply reaches the receiver under its run's
// delivery id, each message's reply under one id, every POST correctly
// signed; a delivery is posted twice only if it was in flight at the kill.
func TestWebhookAdapterKill(t *testing.T) {
	sb := binary(t, "sessionbus")
	data, dir := t.TempDir(), t.TempDir()
	cfgPath := filepath.Join(dir, "sessionbus.yaml")
	secret := []byte("a-shared-secret-for-the-test")
	secretFile, tokenFile := filepath.Join(dir, "web.secret"), filepath.Join(dir, "web.token")
	if err := os.WriteFile(cfgPath, []byte("session:\n  dmScope: per-peer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, "serve", "--data", data, "--listen", anyPort, "--config", cfgPath)
	url, _ := srv.ready(t)
	operator := filepath.Join(data, "operator.creds")
	adapterCreds := filepath.Join(dir, "adapter-web.creds")
	if _, errOut, code := run(t, "", sb, "creds", "--data", data, "--channel", "web", "--out", adapterCreds, "adapter"); code != 0 {
		t.Fatalf("creds: %s", errOut)
	}
	tok, errOut, code := run(t, "", sb, "token", "--creds", operator, "--adapter", "web", "--ttl", "1h")
	if code != 0 {
		t.Fatalf("token: %s", errOut)
	}
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}

	rcv := &adapterReceiver{secret: secret, ids: map[string][]string{}, release: make(chan struct{})}
	hs := httptest.NewServer(rcv)
	defer hs.Close()
	adapters := make([]*proc, 2)
	urls := make([]string, 2)
	for i := range adapters {
		adapters[i] = start(t, "adapter", "webhook", "--server", url, "--creds", adapterCreds, "--token-file", tokenFile,
			"--channel", "web", "--listen", "127.0.0.1:0", "--deliver-url", hs.URL, "--secret-file", secretFile,
			"--ack-wait", "3s", "--timeout", "2s", "--backoff", "50ms", "--attempts", "100")
		line := adapters[i].waitLine(t, "listening on ")
		u, _, _ := strings.Cut(strings.TrimPrefix(line, "listening on "), ",")
		urls[i] = u
	}

	const total, peers = 500, 50
	var sent atomic.Int64
	var killOnce sync.Once
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, total)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				switch sent.Add(1) {
				case total * 2 / 5:
					// the receiver stops answering: deliveries pile up in
					// the stream, and an adapter that took (acked) more
					// than the receiver took would lose them in the kill
					rcv.holding.Store(true)
				case total / 2:
					// SIGKILL: no shutdown; what it held goes to the other
					killOnce.Do(func() {
						_ = adapters[0].cmd.Process.Kill()
						rcv.holding.Store(false)
						close(rcv.release)
					})
				}
				body, _ := json.Marshal(map[string]any{"from": fmt.Sprint("peer", i%peers), "text": fmt.Sprint("message ", i), "idempotencyKey": fmt.Sprint("m-", i)})
				errs <- postRetrying(urls, i%2, body, secret)
			}
		}()
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	bustest.WaitFor(t, 2*time.Minute, "every reply delivered", func() bool { return rcv.distinct() == total })

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.badSig != 0 {
		t.Fatalf("%d deliveries with a bad signature", rcv.badSig)
	}
	byText := map[string]string{}
	repeats := 0
	for id, msgs := range rcv.ids {
		if !strings.HasSuffix(id, ":reply") {
			t.Fatalf("delivery id %q is not a run's reply id", id)
		}
		for _, m := range msgs[1:] {
			if m != msgs[0] {
				t.Fatalf("delivery %s posted with two bodies: %q, %q", id, msgs[0], m)
			}
		}
		repeats += len(msgs) - 1
		if other, dup := byText[msgs[0]]; dup {
			t.Fatalf("reply %q delivered under two ids %s and %s", msgs[0], other, id)
		}
		byText[msgs[0]] = id
	}
	for i := range total {
		if _, ok := byText[fmt.Sprint("message ", i)]; !ok {
			t.Fatalf("no reply to message %d", i)
		}
	}
	// one delivery is handed out at a time (--max-in-flight 1): at most the
	// one the killed adapter had posted and not yet acked comes again
	if repeats > 1 {
		t.Fatalf("%d deliveries posted again", repeats)
	}
	t.Logf("%d replies, %d posted again after the kill", total, repeats)
}

// postRetrying POSTs a message to adapter first, and to the other
// adapter when that one is gone: the idempotency key keeps a message that
// reached the bus before its adapter died from running twice.
func postRetrying(urls []string, first int, body, secret []byte) error {
	var last error
	for try := range 4 {
		u := urls[(first+try)%len(urls)]
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("X-Sessionbus-Timestamp", ts)
		req.Header.Set("X-Sessionbus-Signature", signBody(secret, ts, body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusAccepted {
			return nil
		}
		last = fmt.Errorf("POST %s: %d %s", u, resp.StatusCode, b)
	}
	return last
}

// signBody is the documented signature: the HMAC-SHA256 of the
// timestamp, "." and the body.
func signBody(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// adapterReceiver is the deliver URL: it records every POST's reply text
// by delivery id and counts bad signatures. While holding, it answers
// nothing until released, and then 503: those POSTs are not taken.
type adapterReceiver struct {
	secret  []byte
	holding atomic.Bool
	release chan struct{}
	mu      sync.Mutex
	ids     map[string][]string
	badSig  int
}

func (r *adapterReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if r.holding.Load() {
		// down for a while: nothing POSTed now is taken
		select {
		case <-r.release:
		case <-req.Context().Done():
		}
		http.Error(w, "receiver down", http.StatusServiceUnavailable)
		return
	}
	var d struct{ Message string }
	_ = json.Unmarshal(body, &d)
	r.mu.Lock()
	defer r.mu.Unlock()
	if ts := req.Header.Get("X-Sessionbus-Timestamp"); ts == "" || req.Header.Get("X-Sessionbus-Signature") != signBody(r.secret, ts, body) {
		r.badSig++
	}
	id := req.Header.Get("X-Sessionbus-Delivery")
	r.ids[id] = append(r.ids[id], d.Message)
	w.WriteHeader(http.StatusOK)
}

func (r *adapterReceiver) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}
