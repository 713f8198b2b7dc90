package console

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestBackoffGrowsAndForgets: after the free failures each failure doubles
// the wait up to the cap; a success starts the key over, and so does a
// quiet loginForgetAfter.
func TestBackoffGrowsAndForgets(t *testing.T) {
	b := newBackoff(3, 100)
	now := time.Unix(1_700_000_000, 0)
	for i := range 2 {
		b.failed("k", now)
		if d := b.wait("k", now); d != 0 {
			t.Fatalf("after %d failures: wait %v, want none", i+1, d)
		}
	}
	want := loginFirstWait
	for i := 3; i < 40; i++ {
		b.failed("k", now)
		if d := b.wait("k", now); d != want {
			t.Fatalf("after %d failures: wait %v, want %v", i, d, want)
		}
		want = min(2*want, loginMaxWait)
	}
	if d := b.wait("k", now.Add(time.Minute)); d != loginMaxWait-time.Minute {
		t.Fatalf("a minute later: wait %v, want %v", d, loginMaxWait-time.Minute)
	}
	if d := b.wait("other", now); d != 0 {
		t.Fatalf("another key waits %v", d)
	}
	b.succeeded("k")
	if d := b.wait("k", now); d != 0 {
		t.Fatalf("after a success: wait %v", d)
	}
	for range 5 {
		b.failed("k", now)
	}
	later := now.Add(loginForgetAfter)
	b.failed("k", later)
	if d := b.wait("k", later); d != 0 {
		t.Fatalf("a failure %v after the last one: wait %v, want the count started over", loginForgetAfter, d)
	}
}

// TestBackoffMemoryIsBounded: a hundred thousand sources are tracked in at most
// the cap, and once they are all forgotten the next failure drops them.
func TestBackoffMemoryIsBounded(t *testing.T) {
	b := newBackoff(3, 1000)
	now := time.Unix(1_700_000_000, 0)
	for i := range 100_000 {
		b.failed(fmt.Sprint("10.", i>>16, ".", (i>>8)&255, ".", i&255), now)
	}
	if n := b.len(); n != 1000 {
		t.Fatalf("%d sources tracked, want the cap 1000", n)
	}
	b.failed("192.0.2.1", now.Add(loginForgetAfter))
	if n := b.len(); n != 1 {
		t.Fatalf("%d sources tracked after they were forgotten, want 1", n)
	}
}

// TestLoginThrottleAttacker: token logins, as an attacker makes them, with
// the clock injected. One address trying 200 users gets 429 after
// loginFreeFromSource failures; 200 addresses trying one user get 429 after
// loginFreeForUser; neither stops another user's valid login from another
// address, and the attacked user logs in again once the back-off ends.
func TestLoginThrottleAttacker(t *testing.T) {
	op, err := bus.NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	forger, err := bus.NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	s := &Server{o: Options{Auth: true, Now: clock.Now}, log: slog.New(slog.DiscardHandler), logins: newLogins(nil, clock.Now, slog.New(slog.DiscardHandler)), throttle: newLoginThrottle(), verifier: bus.NewVerifier(op.PublicKey())}
	mint := func(o *bus.Operator, key string) string {
		t.Helper()
		tok, err := o.Mint(bus.Caller{SessionKey: key}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	login := func(from, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"token":"`+token+`"}`))
		r.RemoteAddr = from + ":40000"
		w := httptest.NewRecorder()
		s.handleLogin(w, r)
		return w
	}
	// hammer sends 200 forged logins and checks that exactly the first
	// free ones were checked (401) and the others refused with 429 and a
	// Retry-After, naming whose back-off refused them
	hammer := func(name string, free int, whose string, from func(i int) string, key func(i int) string) {
		t.Helper()
		refused := 0
		for i := range 200 {
			w := login(from(i), mint(forger, key(i)))
			switch {
			case i < free && w.Code != http.StatusUnauthorized:
				t.Fatalf("%s: attempt %d: %d %s, want 401", name, i, w.Code, w.Body)
			case i >= free && (w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), whose)):
				t.Fatalf("%s: attempt %d: %d %s (Retry-After %q), want 429 %s with Retry-After 1", name, i, w.Code, w.Body, w.Header().Get("Retry-After"), whose)
			case w.Code == http.StatusTooManyRequests:
				refused++
			}
		}
		if refused != 200-free {
			t.Fatalf("%s: %d of 200 refused with 429, want %d", name, refused, 200-free)
		}
	}
	hammer("one address, many users", loginFreeFromSource, "from this address",
		func(int) string { return "198.51.100.66" }, func(i int) string { return fmt.Sprint("agent:main:s", i) })
	hammer("many addresses, one user", loginFreeForUser, "for this user",
		func(i int) string { return fmt.Sprint("203.0.113.", i) }, func(int) string { return "agent:main:main" })

	if w := login("192.0.2.7", mint(op, "agent:main:other")); w.Code != http.StatusOK {
		t.Fatalf("another user's valid login from another address: %d %s", w.Code, w.Body)
	}
	w := login("192.0.2.7", mint(op, "agent:main:main"))
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("the attacked user's valid login during its back-off: %d %s, want 429", w.Code, w.Body)
	}
	clock.Add(time.Second)
	if w := login("192.0.2.7", mint(op, "agent:main:main")); w.Code != http.StatusOK {
		t.Fatalf("the attacked user's valid login after its back-off: %d %s", w.Code, w.Body)
	}
	// the success started the user over: a failure is checked again
	if w := login("192.0.2.8", mint(forger, "agent:main:main")); w.Code != http.StatusUnauthorized {
		t.Fatalf("a failure after the user's success: %d %s, want 401", w.Code, w.Body)
	}
	// the hammering address's next failure doubles its wait
	if w := login("198.51.100.66", mint(forger, "agent:main:x")); w.Code != http.StatusUnauthorized {
		t.Fatalf("the attacker's address after its wait: %d %s, want 401", w.Code, w.Body)
	}
	if w := login("198.51.100.66", mint(op, "agent:main:y")); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("the attacker's address after one more failure: %d %s (Retry-After %q), want 429 with Retry-After 2", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
}
