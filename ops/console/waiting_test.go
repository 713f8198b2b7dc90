package console_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/ops/console"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// rowOf is key's row in the first page of path, nil when absent.
func (f *fixture) rowOf(path, key string) (*console.Row, []console.Row) {
	f.t.Helper()
	code, body := f.do(f.client(f.credsText(auth.RoleOps)), "GET", path, nil, false)
	if code != 200 {
		f.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	var p console.Page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		f.t.Fatal(err)
	}
	for i := range p.Rows {
		if p.Rows[i].Key == key {
			return &p.Rows[i], p.Rows
		}
	}
	return nil, p.Rows
}

// A session whose agent answered a person last is marked waiting and
// listed before newer sessions; its row previews the reply in one bounded
// line. A sub-agent's session, or one whose newest message is a person's,
// is not waiting.
func TestWaitingAndPreview(t *testing.T) {
	f := newFixture(t)
	// newer than main, nothing said in it
	const quiet = "agent:main:group:quiet"
	f.stack.Put(&sessions.Entry{Key: quiet, AgentID: "main", SessionID: sessions.NewID(), LastChannel: "terminal", UpdatedAt: time.Now().Add(time.Hour).UnixMilli()})
	var row *console.Row
	var rows []console.Row
	bustest.WaitFor(t, 30*time.Second, "main's row marked waiting with its reply", func() bool {
		row, rows = f.rowOf("/api/sessions", mainKey)
		ok := row != nil && row.Waiting && row.Preview == "pong: ping hello"
		if !ok && row != nil {
			t.Logf("row: %+v", *row)
		}
		return ok
	})
	if row.PreviewRole != "assistant" {
		t.Fatalf("preview role %q, want assistant", row.PreviewRole)
	}
	if rows[0].Key != mainKey {
		t.Fatalf("the waiting session is not first: %s first", rows[0].Key)
	}
	if q, _ := f.rowOf("/api/sessions", quiet); q == nil || q.Waiting {
		t.Fatalf("quiet session: %+v, want listed, not waiting", q)
	}
	if _, only := f.rowOf("/api/sessions?waiting=1", mainKey); len(only) != 1 || only[0].Key != mainKey {
		t.Fatalf("waiting filter: %d rows", len(only))
	}
	// a long reply is previewed in one bounded line
	long := strings.Repeat("x", 300) + "\n\nsecond line"
	f.chatAs(mainKey, "ping "+long)
	bustest.WaitFor(t, 30*time.Second, "the long reply's preview", func() bool {
		row, _ = f.rowOf("/api/sessions", mainKey)
		return row != nil && strings.HasPrefix(row.Preview, "pong: ping xxx")
	})
	if n := len([]rune(row.Preview)); n > console.PreviewMaxChars+1 || !strings.HasSuffix(row.Preview, "…") || strings.Contains(row.Preview, "\n") {
		t.Fatalf("preview of %d chars: %q", n, row.Preview)
	}
	// a sub-agent's session never waits on a person
	child := f.spawn("kid", "kid")
	f.finish("kid")
	bustest.WaitFor(t, 30*time.Second, "the child's reply previewed", func() bool {
		c, _ := f.rowOf("/api/sessions?limit=200", child)
		return c != nil && strings.Contains(c.Preview, "finished kid")
	})
	if c, _ := f.rowOf("/api/sessions?limit=200", child); c.Waiting {
		t.Fatal("a sub-agent's session is marked waiting")
	}
}

// An admin restores an archived session from the console, through the
// same code as `sessionbus archive restore`; an ops login is refused with
// 403, and the restore is in the session's signal log with the user.
func TestArchiveRestore(t *testing.T) {
	f := newFixture(t)
	const key = "agent:main:group:phoenix"
	f.stack.Put(&sessions.Entry{Key: key, AgentID: "main", SessionID: sessions.NewID(), UpdatedAt: time.Now().UnixMilli()})
	f.chatAs(key, "ping from the ashes")
	admin := f.client(f.credsText(auth.RoleAdmin))
	if code, body := f.do(admin, "POST", "/api/session/delete", map[string]any{"key": key}, true); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	var o console.Ops
	bustest.WaitFor(t, 30*time.Second, "the archive listed", func() bool {
		code, body := f.do(admin, "GET", "/api/ops", nil, false)
		return code == 200 && json.Unmarshal([]byte(body), &o) == nil && len(o.Archives) == 1
	})
	id := o.Archives[0].ID
	ops := f.client(f.credsText(auth.RoleOps))
	if code, body := f.do(ops, "POST", "/api/archive/restore", map[string]any{"id": id}, true); code != 403 {
		t.Fatalf("restore from an ops login: %d %s, want 403", code, body)
	}
	if code, _ := f.do(admin, "POST", "/api/archive/restore", map[string]any{"id": "nope"}, true); code != 404 {
		t.Fatalf("restore of an unknown archive: %d, want 404", code)
	}
	code, body := f.do(admin, "POST", "/api/archive/restore", map[string]any{"id": id}, true)
	if code != 200 || !strings.Contains(body, `"op":"restore"`) {
		t.Fatalf("restore: %d %s", code, body)
	}
	bustest.WaitFor(t, 30*time.Second, "the restored session's transcript", func() bool {
		code, body := f.do(admin, "GET", "/api/session?key="+url.QueryEscape(key), nil, false)
		return code == 200 && strings.Contains(body, "pong: ping from the ashes")
	})
	ev := waitSignalWhere(t, f, key, func(ev signals.Event) bool {
		return ev.ActorID == "console:admin-test" && ev.Payload["action"] == "restore"
	})
	if !strings.Contains(ev.Summary, "restore archive "+id+": ok") {
		t.Fatalf("signal: %+v", ev)
	}
	// a live session is never overwritten
	if code, body := f.do(admin, "POST", "/api/archive/restore", map[string]any{"id": id}, true); code != 400 || !strings.Contains(body, "exists") {
		t.Fatalf("restore over a live session: %d %s, want 400", code, body)
	}
}
