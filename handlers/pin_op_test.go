package handlers_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// TestPinOp: <prefix>.ops.session.pin pins and unpins a session; pinned
// sessions come first in sessions_list (then the newest, as before), under
// every visibility, and the pinned filter selects them. A missing flag and
// an unknown session are refused, writing nothing.
func TestPinOp(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "agent" })
	seed(s,
		&sessions.Entry{Key: mainKey},
		&sessions.Entry{Key: "agent:main:telegram:group:g1"},
		&sessions.Entry{Key: "agent:main:subagent:x", SpawnedBy: mainKey},
		&sessions.Entry{Key: "agent:main:cron:old"},
	)
	pin := func(key string, pinned any) (map[string]any, error) {
		body, _ := json.Marshal(map[string]any{"sessionKey": key, "pinned": pinned})
		reply, err := bus.SessionOp(bustest.Context(t), s.Conn, s.Worker.Deps.Names, "pin", s.Token(bus.Caller{Adapter: bus.AnyChannel}), body)
		if err != nil {
			return nil, err
		}
		var out map[string]any
		if err := json.Unmarshal(reply, &out); err != nil {
			t.Fatalf("reply %s: %v", reply, err)
		}
		return out, nil
	}
	list := func(as, params string) string {
		t.Helper()
		if err := s.Worker.Deps.Index.Sync(bustest.Context(t)); err != nil {
			t.Fatal(err)
		}
		return strings.Join(keys(t, s.MustCall(as, "sessions_list", params)), ",")
	}
	const newestFirst = "agent:main:main,agent:main:telegram:group:g1,agent:main:subagent:x,agent:main:cron:old"
	if got := list(mainKey, `{}`); got != newestFirst {
		t.Fatalf("before pinning: %s", got)
	}
	for _, key := range []string{"agent:main:cron:old", "agent:main:subagent:x"} {
		if res, err := pin(key, true); err != nil || res["status"] != "set" || res["pinned"] != true {
			t.Fatalf("pin %s: %v %v", key, res, err)
		}
	}
	if res, err := pin("agent:main:cron:old", true); err != nil || res["status"] != "unchanged" {
		t.Fatalf("pin again: %v %v", res, err)
	}
	const pinnedFirst = "agent:main:subagent:x,agent:main:cron:old,agent:main:main,agent:main:telegram:group:g1"
	if got := list(mainKey, `{}`); got != pinnedFirst {
		t.Fatalf("after pinning: %s, want %s", got, pinnedFirst)
	}
	if got := list(mainKey, `{"limit":1,"offset":1}`); got != "agent:main:cron:old" {
		t.Fatalf("a page after pinning: %s", got)
	}
	if got := list(mainKey, `{"pinned":true}`); got != "agent:main:subagent:x,agent:main:cron:old" {
		t.Fatalf("pinned filter: %s", got)
	}
	if got := list(mainKey, `{"pinned":false}`); got != "agent:main:main,agent:main:telegram:group:g1" {
		t.Fatalf("unpinned filter: %s", got)
	}
	if res, err := pin("agent:main:subagent:x", false); err != nil || res["status"] != "set" || res["pinned"] != false {
		t.Fatalf("unpin: %v %v", res, err)
	}
	if got := list(mainKey, `{}`); got != "agent:main:cron:old,agent:main:main,agent:main:telegram:group:g1,agent:main:subagent:x" {
		t.Fatalf("after unpinning: %s", got)
	}
	before := writesOf(t, s)
	if _, err := pin("agent:main:nobody", true); code(err) != bus.CodeNotFound {
		t.Fatalf("unknown session: %v", err)
	}
	body := []byte(`{"sessionKey":"agent:main:main"}`)
	if _, err := bus.SessionOp(bustest.Context(t), s.Conn, s.Worker.Deps.Names, "pin", s.Token(bus.Caller{Adapter: bus.AnyChannel}), body); code(err) != bus.CodeBadRequest || !strings.Contains(err.Error(), "pinned required") {
		t.Fatalf("no flag: %v", err)
	}
	if _, err := pin(mainKey, "yes"); code(err) != bus.CodeBadRequest {
		t.Fatalf("a flag that is no boolean: %v", err)
	}
	if after := writesOf(t, s); !maps.Equal(before, after) {
		t.Fatalf("refused pins wrote: %v %v", before, after)
	}
}

// TestPinnedFirstInTree: under tree visibility (the requester's children
// and itself, sorted apart from the index) pinned sessions come first too.
func TestPinnedFirstInTree(t *testing.T) {
	s := handlerstest.Start(t, nil)
	seed(s,
		&sessions.Entry{Key: mainKey},
		&sessions.Entry{Key: "agent:main:subagent:a", SpawnedBy: mainKey},
		&sessions.Entry{Key: "agent:main:subagent:b", SpawnedBy: mainKey, Pinned: true},
	)
	if got := strings.Join(keys(t, s.MustCall(mainKey, "sessions_list", `{}`)), ","); got != "agent:main:subagent:b,agent:main:main,agent:main:subagent:a" {
		t.Fatalf("tree list: %s", got)
	}
}
