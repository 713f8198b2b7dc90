package webhook_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/client/webhook"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/gateway/gatewaytest"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/streams/deliveries"
)

var secret = []byte("s3cret-for-tests")

// stack is a worker and a gateway whose script agent answers "hello X"
// with "hi X", routing direct messages per channel and peer, with no run
// quota in the way of many turns.
func stack(t *testing.T) *handlerstest.Stack {
	t.Helper()
	st := handlerstest.Start(t, func(c *config.Config) {
		c.Session.DMScope = "per-channel-peer"
		c.Quotas.RunsPerSession.Rate, c.Quotas.RunsPerAgent.Rate = 0, 0
		c.Agents.List = []config.Agent{{ID: "main", Runtime: "script", Script: map[string]any{"rules": []any{
			map[string]any{"match": "^hello (.*)", "reply": "hi {{1}}"},
		}}}}
	})
	gatewaytest.Start(t, st, st.Conn, "gw1", nil, gateway.Options{})
	return st
}

// adapter is an adapter for channel on its own connection with the
// channel adapter role's credentials, as `sessionbus creds --channel`
// mints them: what it can do is what a deployed adapter can.
func adapter(t *testing.T, st *handlerstest.Stack, channel string, o webhook.Options) *webhook.Adapter {
	t.Helper()
	u, err := st.Server.Deployment().MintAdapter(auth.DefaultAccount, channel, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.Creds()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "adapter.creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := auth.ConnectOptions(path)
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := bustest.ConnectURL(t, st.Server.URL(), opts...)
	tok := st.Token(bus.Caller{Adapter: channel})
	o.Channel, o.Names = channel, bus.NewNames("")
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Token == nil {
		o.Token = func() (string, error) { return tok, nil }
	}
	if o.DeliverURL == "" {
		o.DeliverURL = "http://127.0.0.1:1/unused"
	}
	a, err := webhook.New(nc, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// post sends body to the adapter's /inbound, signed when sign is set.
func post(t *testing.T, url string, body []byte, sign bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+webhook.InboundPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if sign {
		signReq(req, time.Now().Unix(), body)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// receiver is the deliver URL: it checks every POST's signature and
// records the ones it took (2xx); while failing it answers 500.
type receiver struct {
	*httptest.Server
	failing  atomic.Bool
	refused  atomic.Int64
	mu       sync.Mutex
	badSig   int
	taken    []taken
	takenIDs map[string]int
}

type taken struct {
	id string
	d  deliveries.Delivery
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{takenIDs: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		ok := validSignature(body, req.Header)
		r.mu.Lock()
		defer r.mu.Unlock()
		if !ok {
			r.badSig++
		}
		if r.failing.Load() {
			r.refused.Add(1)
			http.Error(w, "receiver down", http.StatusInternalServerError)
			return
		}
		var d deliveries.Delivery
		_ = json.Unmarshal(body, &d)
		id := req.Header.Get(webhook.HeaderDelivery)
		r.taken = append(r.taken, taken{id: id, d: d})
		r.takenIDs[id]++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// signReq signs req as a sender does by the documented format alone:
// the timestamp ts, and "sha256=" with the hex HMAC-SHA256 of ts, "."
// and the body.
func signReq(req *http.Request, ts int64, body []byte) {
	t := strconv.FormatInt(ts, 10)
	req.Header.Set("X-Sessionbus-Timestamp", t)
	req.Header.Set("X-Sessionbus-Signature", hmacHex(t+"."+string(body)))
}

func hmacHex(payload string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(payload))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// validSignature checks a delivery's signature as a receiver would, by
// the documented format alone: a timestamp within 5 minutes of now, and
// "sha256=" with the hex HMAC-SHA256 of the timestamp, "." and the body.
func validSignature(body []byte, h http.Header) bool {
	ts, err := strconv.ParseInt(h.Get("X-Sessionbus-Timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Minute {
		return false
	}
	return hmac.Equal([]byte(h.Get("X-Sessionbus-Signature")), []byte(hmacHex(h.Get("X-Sessionbus-Timestamp")+"."+string(body))))
}

func (r *receiver) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.takenIDs)
}

// start runs a's deliveries until the test ends.
func start(t *testing.T, a *webhook.Adapter) {
	t.Helper()
	d, err := a.Start(bustest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
}
