package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/ops/console"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// On a bus with auth every page needs a login; admin credentials may act,
// ops credentials only look (the server refuses their actions with 403,
// whatever the page shows), and credentials of another role or another
// deployment do not log in.
func TestLoginAndRoles(t *testing.T) {
	f := newFixture(t)
	anon := f.client("")
	if code, _ := f.do(anon, "GET", "/api/sessions", nil, false); code != 401 {
		t.Fatalf("sessions without a login: %d, want 401", code)
	}
	for _, role := range []auth.Role{auth.RoleWorker, auth.RoleAgent, auth.RoleAdapter} {
		if code, body := f.do(anon, "POST", "/api/login", map[string]any{"creds": f.credsText(role)}, false); code != 401 {
			t.Fatalf("login as %s: %d %s, want 401", role, code, body)
		}
	}
	other, err := auth.LoadOrCreate(t.TempDir(), auth.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := other.Mint(auth.DefaultAccount, auth.RoleAdmin, "stranger", "", 0)
	b, _ := u.Creds()
	if code, body := f.do(anon, "POST", "/api/login", map[string]any{"creds": string(b)}, false); code != 401 || !strings.Contains(body, "another deployment") {
		t.Fatalf("login with another deployment's admin: %d %s", code, body)
	}
	child := f.spawn("victim", "never")
	ops := f.client(f.credsText(auth.RoleOps))
	if code, body := f.do(ops, "GET", "/api/me", nil, false); code != 200 || !strings.Contains(body, `"canAct":false`) {
		t.Fatalf("ops me: %d %s", code, body)
	}
	if code, body := f.do(ops, "GET", "/api/sessions", nil, false); code != 200 || !strings.Contains(body, mainKey) {
		t.Fatalf("ops sessions: %d %s", code, body)
	}
	for _, a := range []struct {
		path string
		body map[string]any
	}{
		{"/api/kill", map[string]any{"target": child}},
		{"/api/kill", map[string]any{"parent": mainKey, "all": true}},
		{"/api/steer", map[string]any{"target": child, "message": "stop"}},
		{"/api/chat", map[string]any{"key": mainKey, "text": "ping"}},
	} {
		if code, body := f.do(ops, "POST", a.path, a.body, true); code != 403 {
			t.Fatalf("ops %s: %d %s, want 403", a.path, code, body)
		}
	}
	admin := f.client(f.credsText(auth.RoleAdmin))
	// a request without the action header (what a cross-site form could send) acts on nothing
	if code, _ := f.do(admin, "POST", "/api/kill", map[string]any{"target": child}, false); code != 403 {
		t.Fatalf("kill without the action header: %d, want 403", code)
	}
	code, body := f.do(admin, "POST", "/api/kill", map[string]any{"target": child}, true)
	if code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("admin kill: %d %s", code, body)
	}
	// the kill is in the controller's signal log, with the console user
	waitSignal(t, f, mainKey, "console:admin-test")
}

// waitSignal waits for a console_action event by actor in key's signal log.
func waitSignal(t *testing.T, f *fixture, key, actor string) signals.Event {
	t.Helper()
	return waitSignalWhere(t, f, key, func(ev signals.Event) bool { return ev.ActorID == actor })
}

// waitSignalWhere waits for a console_action event in key's signal log
// that ok accepts.
func waitSignalWhere(t *testing.T, f *fixture, key string, ok func(signals.Event) bool) signals.Event {
	t.Helper()
	_, js := bustest.Connect(t, f.stack.Server)
	log, err := signals.Open(context.Background(), js, bus.NewNames(f.stack.Config.Bus.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	var found signals.Event
	bustest.WaitFor(t, 30*time.Second, "a console_action in "+key+"'s signal log", func() bool {
		ch, err := log.Since(context.Background(), key, 0, 100)
		if err != nil {
			return false
		}
		for _, ev := range ch.Events {
			if ev.Kind == signals.KindConsoleAction && ok(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// Without auth on the bus, the console refuses any address but loopback.
func TestNonLoopbackRefusedWithoutAuth(t *testing.T) {
	s := bustest.InsecureServer(t)
	nc, _ := bustest.Connect(t, s)
	_, err := console.Start(context.Background(), console.Options{Conn: nc, Operator: bustest.Operator(t), Names: bus.NewNames(""), Listen: "0.0.0.0:0"})
	if !errors.Is(err, console.ErrNotLoopback) {
		t.Fatalf("start on 0.0.0.0 without auth: %v, want ErrNotLoopback", err)
	}
	for addr, want := range map[string]bool{"127.0.0.1:4280": true, "[::1]:1": true, "localhost:1": true, "0.0.0.0:1": false, ":4280": false, "10.0.0.1:1": false} {
		if got := console.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}

// The list is paged from the server: a page holds at most its limit,
// sessions with a run in flight come first, and the filters apply.
func TestSessionsPaged(t *testing.T) {
	f := newFixture(t)
	now := time.Now().UnixMilli()
	for i := range 120 {
		f.stack.Put(&sessions.Entry{Key: fmt.Sprintf("agent:main:group:g%03d", i), AgentID: "main", SessionID: sessions.NewID(),
			UpdatedAt: now - int64(i)*1000, Label: fmt.Sprintf("L%d", i%3)})
	}
	child := f.spawn("busy", "busy")
	admin := f.client(f.credsText(auth.RoleAdmin))
	var p console.Page
	bustest.WaitFor(t, 30*time.Second, "the child first, as running", func() bool {
		code, body := f.do(admin, "GET", "/api/sessions?limit=10", nil, false)
		if code != 200 || json.Unmarshal([]byte(body), &p) != nil || len(p.Rows) == 0 {
			return false
		}
		return p.Rows[0].Key == child && p.Rows[0].Active
	})
	if len(p.Rows) != 10 || !p.More || p.Total < 122 {
		t.Fatalf("first page: %d rows, more %v, total %d", len(p.Rows), p.More, p.Total)
	}
	_, body := f.do(admin, "GET", "/api/sessions?limit=200&label=L1&kinds=group", nil, false)
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if p.Total != 40 || len(p.Rows) != 40 {
		t.Fatalf("label L1: total %d, rows %d, want 40", p.Total, len(p.Rows))
	}
	_, body = f.do(admin, "GET", "/api/sessions?limit=5&offset=115&kinds=group", nil, false)
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 5 || p.Rows[4].Key != "agent:main:group:g119" || p.More {
		t.Fatalf("last page: %+v", p)
	}
	f.finish("busy")
}

// A token login sees what its session may see, through the tools, and
// acts on nothing.
func TestTokenLogin(t *testing.T) {
	f := newFixture(t)
	child := f.spawn("kid", "kid")
	other := "agent:main:group:elsewhere"
	f.stack.Put(&sessions.Entry{Key: other, AgentID: "main", SessionID: sessions.NewID(), UpdatedAt: time.Now().UnixMilli()})
	tok := f.stack.Token(bus.Caller{SessionKey: mainKey})
	hc := f.client("")
	if code, body := f.do(hc, "POST", "/api/login", map[string]any{"token": tok}, false); code != 200 || !strings.Contains(body, `"role":"viewer"`) {
		t.Fatalf("token login: %d %s", code, body)
	}
	_, body := f.do(hc, "GET", "/api/sessions", nil, false)
	var p console.Page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range p.Rows {
		keys[r.Key] = true
	}
	// the default visibility (tree): itself, not another session of its
	// agent outside its tree (and its child of another agent only with
	// agent-to-agent access, off by default)
	if !keys[mainKey] || keys[other] {
		t.Fatalf("a token login lists %v", keys)
	}
	if code, body := f.do(hc, "GET", "/api/session?key="+url.QueryEscape(other), nil, false); code != 403 {
		t.Fatalf("a session outside the token's visibility: %d %s, want 403", code, body)
	}
	if code, body := f.do(hc, "GET", "/api/session?key="+url.QueryEscape(mainKey), nil, false); code != 200 || !strings.Contains(body, "pong: ping hello") {
		t.Fatalf("the token's own session: %d %.300s", code, body)
	}
	if code, _ := f.do(hc, "GET", "/api/board?key="+url.QueryEscape(child), nil, false); code != 403 {
		t.Fatalf("another session's board: %d, want 403", code)
	}
	if code, _ := f.do(hc, "GET", "/api/ops", nil, false); code != 403 {
		t.Fatalf("ops page for a token login: %d, want 403", code)
	}
	if code, _ := f.do(hc, "POST", "/api/kill", map[string]any{"target": child}, true); code != 403 {
		t.Fatalf("kill from a token login: %d, want 403", code)
	}
	adapter := f.stack.Token(bus.Caller{Adapter: "webchat"})
	if code, _ := f.do(f.client(""), "POST", "/api/login", map[string]any{"token": adapter}, false); code != 401 {
		t.Fatalf("adapter token login: %d, want 401", code)
	}
	f.finish("kid")
}

// An admin deletes a session from the console: its transcript is archived
// first, the operations page lists the archive, and both roles may
// download it; an ops login may not delete.
func TestDeleteAndArchive(t *testing.T) {
	f := newFixture(t)
	const key = "agent:main:group:doomed"
	f.stack.Put(&sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), UpdatedAt: time.Now().UnixMilli()})
	f.chatAs(key, "ping last words")
	ops := f.client(f.credsText(auth.RoleOps))
	if code, _ := f.do(ops, "POST", "/api/session/delete", map[string]any{"key": key}, true); code != 403 {
		t.Fatalf("delete from an ops login: %d, want 403", code)
	}
	admin := f.client(f.credsText(auth.RoleAdmin))
	if code, body := f.do(admin, "POST", "/api/session/delete", map[string]any{"key": key}, true); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	var o console.Ops
	bustest.WaitFor(t, 30*time.Second, "the archive on the operations page", func() bool {
		code, body := f.do(ops, "GET", "/api/ops", nil, false)
		return code == 200 && json.Unmarshal([]byte(body), &o) == nil && len(o.Archives) == 1 && o.Archives[0].Key == key
	})
	code, body := f.do(ops, "GET", "/api/archive?id="+url.QueryEscape(o.Archives[0].ID), nil, false)
	if code != 200 || !strings.Contains(body, "pong: ping last words") {
		t.Fatalf("archive download: %d %.300s", code, body)
	}
	if code, _ := f.do(ops, "GET", "/api/archive?id=nope", nil, false); code != 404 {
		t.Fatalf("unknown archive: %d, want 404", code)
	}
	bustest.WaitFor(t, 30*time.Second, "the session gone from the list", func() bool {
		code, _ := f.do(admin, "GET", "/api/session?key="+url.QueryEscape(key), nil, false)
		return code == 404
	})
	waitSignal(t, f, key, "console:admin-test")
}

// Admin and ops read a leaf sub-agent's page on the console's own path:
// the child's tools may not call session_status or sessions_history, and
// its card, transcript, runs and signal log still come back, with no
// error from the child's policy. A token login of the same child keeps
// its tools' answer.
func TestLeafChildPageForOperators(t *testing.T) {
	f := newFixture(t)
	child := f.spawn("leafy", "leafy")
	for _, role := range []auth.Role{auth.RoleAdmin, auth.RoleOps} {
		hc := f.client(f.credsText(role))
		var d console.Detail
		bustest.WaitFor(t, 30*time.Second, "the child's run and its task on its page", func() bool {
			code, body := f.do(hc, "GET", "/api/session?key="+url.QueryEscape(child), nil, false)
			if code == 404 {
				return false // the console's index has not seen the spawn yet
			}
			if code != 200 {
				t.Fatalf("%s: the leaf's page: %d %s", role, code, body)
			}
			d = console.Detail{}
			if json.Unmarshal([]byte(body), &d) != nil || len(d.Runs) == 0 {
				return false
			}
			b, _ := json.Marshal(d.History)
			return strings.Contains(string(b), "wait:leafy")
		})
		if len(d.Errors) > 0 || len(d.Notes) > 0 {
			t.Fatalf("%s: the leaf's page says %q %q", role, d.Errors, d.Notes)
		}
		fields := map[string]string{}
		for _, fl := range d.Card {
			fields[fl.Label] = fl.Value
		}
		if fields["agent"] != "slow" || fields["spawned by"] != mainKey {
			t.Fatalf("%s: the leaf's card: %+v", role, d.Card)
		}
		if d.Signals == nil {
			t.Fatalf("%s: no signal log", role)
		}
	}
	// the child's own token: its tools say no to session_status, and the
	// page says so instead of showing an empty card
	hc := f.client("")
	if code, body := f.do(hc, "POST", "/api/login", map[string]any{"token": f.stack.Token(bus.Caller{SessionKey: child})}, false); code != 200 {
		t.Fatalf("token login: %d %s", code, body)
	}
	if code, body := f.do(hc, "GET", "/api/session?key="+url.QueryEscape(child), nil, false); code != 403 || !strings.Contains(body, "may not see") {
		t.Fatalf("the leaf's own token on its page: %d %s, want 403", code, body)
	}
	f.finish("leafy")
}
