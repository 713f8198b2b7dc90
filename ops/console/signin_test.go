package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/ops/console"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// signIn opens link with a fresh cookie jar and returns the client and
// the final status and body.
func signIn(t *testing.T, link string) (*http.Client, int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	res, err := hc.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return hc, res.StatusCode, string(b)
}

// A sign-in link logs a browser in as its role once: the same link again
// is refused, and so is a link past its lifetime or one made up.
func TestSignInLinkOnceAndExpires(t *testing.T) {
	clock := &testClock{t: time.Now()}
	f := newFixtureWith(t, func(_ *handlerstest.Stack, o *console.Options) { o.Now = clock.Now })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := f.c.SignInLink(ctx, "root", 0); err == nil || !strings.Contains(err.Error(), "admin") {
		t.Fatalf("a link for an unknown role: %v", err)
	}
	link, err := f.c.SignInLink(ctx, "ops", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b := tab(t)
	do(t, b, "open the link",
		chromedp.Navigate(link),
		waitFor(`() => document.querySelector('#whoami')?.dataset.role === 'viewer'`),
		// the token leaves the address bar
		waitFor(`() => !location.href.includes('signin')`))
	shot(t, b, "signed-in-ops")
	if _, code, body := signIn(t, link); code != http.StatusUnauthorized || !strings.Contains(body, "used already") {
		t.Fatalf("the same link again: %d %s, want 401", code, body)
	}
	late, err := f.c.SignInLink(ctx, "admin", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock.add(2 * time.Minute)
	if _, code, body := signIn(t, late); code != http.StatusUnauthorized {
		t.Fatalf("an expired link: %d %s, want 401", code, body)
	}
	if _, code, _ := signIn(t, strings.TrimSuffix(f.c.URL(), "/")+"/signin?t=made-up"); code != http.StatusUnauthorized {
		t.Fatalf("a made-up link: %d, want 401", code)
	}
	admin, err := f.c.SignInLink(ctx, "admin", 0)
	if err != nil {
		t.Fatal(err)
	}
	hc, code, body := signIn(t, admin)
	if code != 200 {
		t.Fatalf("an admin link: %d %s", code, body)
	}
	if code, body := f.do(hc, "GET", "/api/me", nil, false); code != 200 || !strings.Contains(body, `"role":"admin"`) || !strings.Contains(body, `"canAct":true`) {
		t.Fatalf("after an admin link: %d %s", code, body)
	}
}

// A login outlives the console that made it: a console started anew on
// the same bus knows the cookie, and a logout there ends it.
func TestLoginSurvivesRestart(t *testing.T) {
	f := newFixture(t)
	hc := f.client(f.credsText(auth.RoleAdmin))
	if code, body := f.do(hc, "GET", "/api/me", nil, false); code != 200 {
		t.Fatalf("me: %d %s", code, body)
	}
	req, _ := http.NewRequest("GET", f.c.URL(), nil)
	cookies := hc.Jar.Cookies(req.URL)
	if len(cookies) != 1 {
		t.Fatalf("cookies after login: %v", cookies)
	}
	f.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := f.stack
	c2, err := console.Start(ctx, console.Options{Conn: s.Conn, Operator: s.Operator, Names: bus.NewNames(s.Config.Bus.Prefix), Listen: "127.0.0.1:0",
		Auth: true, Account: s.Server.Deployment().AccountKey(auth.DefaultAccount)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	get := func(path string, action bool) (int, string) {
		t.Helper()
		method := "GET"
		if action {
			method = "POST"
		}
		r, _ := http.NewRequest(method, strings.TrimSuffix(c2.URL(), "/")+path, strings.NewReader("{}"))
		r.AddCookie(cookies[0])
		if action {
			r.Header.Set("X-Sessionbus-Console", "1")
		}
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("/api/me", false); code != 200 || !strings.Contains(body, `"user":"admin-test"`) {
		t.Fatalf("the login after a restart: %d %s", code, body)
	}
	if code, body := get("/api/logout", true); code != 200 {
		t.Fatalf("logout: %d %s", code, body)
	}
	if code, _ := get("/api/me", false); code != http.StatusUnauthorized {
		t.Fatalf("after logout: %d, want 401", code)
	}
}
