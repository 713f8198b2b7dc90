package console_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/ops/console"
)

type loginClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *loginClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *loginClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestLoginThrottledOverHTTP: 200 forged credentials files posted in a loop
// from one address, as the attacker's probe did: the first ten are checked
// by the server (401), every other is refused at once with 429 and a
// Retry-After, and so is a genuine admin's file from that address until the
// wait is over (the clock is the console's, injected); then it logs in.
func TestLoginThrottledOverHTTP(t *testing.T) {
	clock := &loginClock{t: time.Now()}
	f := newFixtureWith(t, func(_ *handlerstest.Stack, o *console.Options) { o.Now = clock.Now })
	anon := f.client("")
	account := f.stack.Server.Deployment().AccountKey(auth.DefaultAccount)
	own, _ := nkeys.CreateAccount()
	forged := func() string {
		user, _ := nkeys.CreateUser()
		pub, _ := user.PublicKey()
		seed, _ := user.Seed()
		uc := jwt.NewUserClaims(pub)
		uc.IssuerAccount = account
		uc.Tags.Add("role:admin")
		tok, err := uc.Encode(own)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(tok, seed)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	codes := map[int]int{}
	start := time.Now()
	for i := range 200 {
		code, body := f.do(anon, "POST", "/api/login", map[string]any{"creds": forged()}, false)
		codes[code]++
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 10]; code != want {
			t.Fatalf("forged login %d: %d %s, want %d", i, code, body, want)
		}
	}
	t.Logf("200 forged logins in %v: %v", time.Since(start), codes)
	req, _ := http.NewRequest("POST", strings.TrimSuffix(f.c.URL(), "/")+"/api/login", strings.NewReader(`{"token":"x"}`))
	res, err := anon.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("a login during the wait: %d, Retry-After %q; want 429 with Retry-After 1", res.StatusCode, res.Header.Get("Retry-After"))
	}
	admin := f.credsText(auth.RoleAdmin)
	if code, body := f.do(anon, "POST", "/api/login", map[string]any{"creds": admin}, false); code != http.StatusTooManyRequests || !strings.Contains(body, "too many failed logins from this address") {
		t.Fatalf("a genuine admin from the hammering address during its wait: %d %s, want 429", code, body)
	}
	clock.Add(time.Second)
	f.client(admin)
}
