package handlers_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

func sessionOp(t *testing.T, s *handlerstest.Stack, c bus.Caller, op, key string) (*lifecycle.Result, error) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"sessionKey": key})
	reply, err := bus.SessionOp(bustest.Context(t), s.Conn, bus.NewNames(""), op, s.Token(c), body)
	if err != nil {
		return nil, err
	}
	var res lifecycle.Result
	if err := json.Unmarshal(reply, &res); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
	return &res, nil
}

func code(err error) int {
	if e, ok := bus.AsError(err); ok {
		return e.Code
	}
	return 0
}

// TestSessionOps: delete and reset on sb.ops.session.<op> take an ops or
// channel adapter token, refuse bad keys and other tokens changing
// nothing, and archived sessions list with sessions_list archived:true.
func TestSessionOps(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "all" })
	ops := bus.Caller{Adapter: bus.AnyChannel}
	s.Import(importer.ImportOptions{SessionKey: "agent:main:a", Label: "alpha"}, `{"role":"user","content":"one"}`, `{"role":"assistant","content":"two"}`)
	s.Import(importer.ImportOptions{SessionKey: "agent:main:b", Label: "beta"}, `{"role":"user","content":"three"}`)
	s.Import(importer.ImportOptions{SessionKey: "agent:main:c"}, `{"role":"user","content":"four"}`)
	s.Update("agent:main:c", func(e *sessions.Entry) { e.LastChannel = "slack" })

	for _, tc := range []struct {
		c    bus.Caller
		key  string
		code int
	}{
		{ops, "agent:main:nobody", bus.CodeNotFound},
		{ops, "agent:main:a b", bus.CodeBadRequest},
		{ops, "", bus.CodeBadRequest},
		{bus.Caller{SessionKey: "agent:main:main"}, "agent:main:a", bus.CodeForbidden}, // an agent's token
		{bus.Caller{Adapter: "telegram"}, "agent:main:c", bus.CodeForbidden},           // another channel's adapter
	} {
		for _, op := range []string{"delete", "reset"} {
			if _, err := sessionOp(t, s, tc.c, op, tc.key); code(err) != tc.code {
				t.Fatalf("%s %q as %+v: %v, want code %d", op, tc.key, tc.c, err, tc.code)
			}
		}
	}
	if n := s.MustCall("agent:main:main", "sessions_list", `{"archived":true}`)["count"]; n != float64(0) {
		t.Fatalf("refused operations archived %v sessions", n)
	}

	res, err := sessionOp(t, s, ops, "delete", "agent:main:a")
	if err != nil || res.Entries != 2 || res.ArchiveID == "" {
		t.Fatalf("delete: %+v %v", res, err)
	}
	res, err = sessionOp(t, s, ops, "reset", "agent:main:b")
	if err != nil || res.Entries != 1 || res.NewSessionID == "" || res.NewSessionID == res.SessionID {
		t.Fatalf("reset: %+v %v", res, err)
	}
	if _, err := sessionOp(t, s, bus.Caller{Adapter: "slack"}, "delete", "agent:main:c"); err != nil {
		t.Fatalf("slack adapter deleting its own channel's session: %v", err)
	}

	keys := func(params string) []string {
		var out []string
		for _, r := range s.MustCall("agent:main:main", "sessions_list", params)["sessions"].([]any) {
			row := r.(map[string]any)
			out = append(out, fmt.Sprintf("%s/%v/%v", row["key"], row["archived"], row["label"]))
		}
		return out
	}
	bustest.WaitFor(t, 10*time.Second, "the index to drop deleted sessions", func() bool { return len(keys(`{}`)) == 1 })
	if got := fmt.Sprint(keys(`{}`)); got != "[agent:main:b/false/beta]" {
		t.Fatalf("live: %s", got)
	}
	// newest archive first
	if got := fmt.Sprint(keys(`{"archived":true}`)); got != "[agent:main:c/true/<nil> agent:main:b/true/beta agent:main:a/true/alpha]" {
		t.Fatalf("archived: %s", got)
	}
	if got := fmt.Sprint(keys(`{"archived":true,"label":"alpha"}`)); got != "[agent:main:a/true/alpha]" {
		t.Fatalf("archived by label: %s", got)
	}
	if got := fmt.Sprint(keys(`{"archived":"all"}`)); got != "[agent:main:b/false/beta agent:main:c/true/<nil> agent:main:b/true/beta agent:main:a/true/alpha]" {
		t.Fatalf("all: %s", got)
	}
	page := s.MustCall("agent:main:main", "sessions_list", `{"archived":"all","limit":2,"offset":1}`)
	if page["count"] != float64(2) || page["hasMore"] != true || page["nextOffset"] != float64(3) {
		t.Fatalf("paging: %v", page)
	}
	// an archived row is not read from the live transcript under its key
	rows := s.MustCall("agent:main:main", "sessions_list", `{"archived":true,"messageLimit":5,"agentId":"main","search":"beta"}`)["sessions"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["messages"] != nil {
		t.Fatalf("archived rows with messages: %v", rows)
	}
}

// sessions_history of a session that was archived and removed (deleted,
// pruned by maintenance) says so and names the archive, instead of an
// empty success; restored, it reads as before.
func TestHistoryOfArchivedSessionNamesArchive(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "all" })
	s.Import(importer.ImportOptions{SessionKey: "agent:main:gone"}, `{"role":"user","content":"remember this"}`, `{"role":"assistant","content":"noted"}`)
	res, err := sessionOp(t, s, bus.Caller{Adapter: bus.AnyChannel}, "delete", "agent:main:gone")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	bustest.WaitFor(t, 20*time.Second, "the deletion seen by the index", func() bool {
		h = s.MustCall("agent:main:main", "sessions_history", `{"sessionKey":"agent:main:gone"}`)
		return h["status"] != nil
	})
	msg, _ := h["error"].(string)
	if h["status"] != "error" || !strings.Contains(msg, res.ArchiveID) || !strings.Contains(msg, "archive restore") || !strings.Contains(msg, "2 entries") {
		t.Fatalf("history of an archived session: %v", h)
	}
	// a key that never had a session reads as empty, as in OpenClaw
	if h := s.MustCall("agent:main:main", "sessions_history", `{"sessionKey":"agent:main:never"}`); h["status"] != nil || len(msgs(t, h)) != 0 {
		t.Fatalf("history of a key without a session: %v", h)
	}
}
