package handlers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/signals"
)

const mainKey = "agent:main:main"

func keys(t *testing.T, res map[string]any) []string {
	t.Helper()
	rows, ok := res["sessions"].([]any)
	if !ok {
		t.Fatalf("no sessions array: %v", res)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.(map[string]any)["key"].(string)
	}
	return out
}

func row(t *testing.T, res map[string]any, key string) map[string]any {
	t.Helper()
	for _, r := range res["sessions"].([]any) {
		if m := r.(map[string]any); m["key"] == key {
			return m
		}
	}
	t.Fatalf("row %s not in %v", key, keys(t, res))
	return nil
}

// seed puts sessions with fixed updatedAt so order is deterministic:
// later in the list = older.
func seed(s *handlerstest.Stack, es ...*sessions.Entry) {
	now := time.Now().UnixMilli()
	for i, e := range es {
		if e.UpdatedAt == 0 {
			e.UpdatedAt = now - int64(i)*1000
		}
		s.Put(e)
	}
	if err := s.Worker.Deps.Index.Sync(s.T.(*testing.T).Context()); err != nil {
		s.T.Fatal(err)
	}
}

func tree() []*sessions.Entry {
	return []*sessions.Entry{
		{Key: mainKey, SessionID: "11111111-1111-4111-8111-111111111111", Label: "main"},
		{Key: "agent:main:subagent:a", SpawnedBy: mainKey, Label: "research"},
		{Key: "agent:main:subagent:b", ParentSessionKey: mainKey, Label: "writer"},
		{Key: "agent:main:subagent:grandchild", SpawnedBy: "agent:main:subagent:a"},
		{Key: "agent:main:discord:group:dev", Label: "dev", ChatType: "group"},
		{Key: "agent:main:cron:nightly"},
		{Key: "agent:main:cron:nightly:run:r1"},
		{Key: "agent:ops:main"},
	}
}

func TestListTreeVisibilityDefault(t *testing.T) {
	s := handlerstest.Start(t, nil)
	seed(s, tree()...)
	res := s.MustCall(mainKey, "sessions_list", `{}`)
	got := strings.Join(keys(t, res), ",")
	if got != "agent:main:main,agent:main:subagent:a,agent:main:subagent:b" {
		t.Fatalf("tree list = %s", got)
	}
	vis := res["visibility"].(map[string]any)
	want := "Session visibility is restricted (effective tools.sessions.visibility=tree: current session + spawned sub-agents). Sessions outside that scope are omitted from results and count."
	if vis["mode"] != "tree" || vis["restricted"] != true || vis["warning"] != want {
		t.Fatalf("visibility = %v", vis)
	}
	if res["count"].(float64) != 3 || res["hasMore"] != false || res["limitApplied"].(float64) != 100 {
		t.Fatalf("meta = %v", res)
	}
	m := row(t, res, mainKey)
	if m["kind"] != "main" || m["agentId"] != "main" || m["archived"] != false || m["pinned"] != false {
		t.Fatalf("main row = %v", m)
	}
	if _, ok := m["stateVersion"]; ok {
		t.Fatalf("stateVersion must be omitted while zero: %v", m)
	}
	if cs := m["childSessions"].([]any); len(cs) != 2 {
		t.Fatalf("childSessions = %v", cs)
	}
	if p := row(t, res, "agent:main:subagent:b")["parentSessionKey"]; p != mainKey {
		t.Fatalf("parentSessionKey = %v", p)
	}
	if k := row(t, res, "agent:main:subagent:a")["kind"]; k != "other" {
		t.Fatalf("subagent kind = %v", k)
	}
}

func TestListAgentAndAllVisibility(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "agent" })
	seed(s, tree()...)
	res := s.MustCall(mainKey, "sessions_list", `{}`)
	got := keys(t, res)
	if len(got) != 6 { // all of agent main, minus the cron run key
		t.Fatalf("agent list = %v", got)
	}
	for _, k := range got {
		if strings.Contains(k, ":run:") || strings.HasPrefix(k, "agent:ops:") {
			t.Fatalf("agent list leaked %s", k)
		}
	}
	if k := row(t, res, "agent:main:discord:group:dev"); k["kind"] != "group" || k["channel"] != "discord" {
		t.Fatalf("group row = %v", k)
	}
	if k := row(t, res, "agent:main:cron:nightly"); k["kind"] != "cron" || k["channel"] != "internal" {
		t.Fatalf("cron row = %v", k)
	}

	all := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "all" })
	seed(all, tree()...)
	res = all.MustCall(mainKey, "sessions_list", `{}`)
	if _, ok := res["visibility"]; ok {
		t.Fatal("visibility=all must not report restriction metadata")
	}
	for _, k := range keys(t, res) {
		if k == "agent:ops:main" {
			t.Fatal("cross-agent row listed with agentToAgent disabled")
		}
	}
	a2a := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "all"
		c.Tools.AgentToAgent.Enabled = true
	})
	seed(a2a, tree()...)
	if got := keys(t, a2a.MustCall(mainKey, "sessions_list", `{}`)); len(got) != 7 {
		t.Fatalf("all+a2a list = %v", got)
	}
}

func TestListSandboxClamp(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "all" })
	seed(s, tree()...)
	res, err := s.CallAs(bus.Caller{SessionKey: mainKey, Sandboxed: true}, "sessions_list", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	// spawned-only: the sandbox sees its children, not even itself
	if got := strings.Join(keys(t, res), ","); got != "agent:main:subagent:a,agent:main:subagent:b" {
		t.Fatalf("sandboxed list = %s", got)
	}
	if res["visibility"].(map[string]any)["mode"] != "tree" {
		t.Fatalf("sandbox must clamp to tree: %v", res["visibility"])
	}
}

func TestListFilters(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "agent" })
	old := time.Now().Add(-3 * time.Hour).UnixMilli()
	seed(s,
		&sessions.Entry{Key: mainKey, Pinned: true},
		&sessions.Entry{Key: "agent:main:telegram:group:g1", Label: "Ops Room", DisplayName: "Ops war room", ChatType: "group"},
		&sessions.Entry{Key: "agent:main:hook:deploy", Archived: true},
		&sessions.Entry{Key: "agent:main:node-device", UpdatedAt: old},
		&sessions.Entry{Key: "agent:main:subagent:x", SpawnedBy: mainKey, Group: "g",
			Rare: &sessions.RareFields{OwnerID: "u1", ProjectID: "p1", WorkspaceDir: "/w", CreatorID: "c1"}},
	)
	cases := []struct{ params, want string }{
		{`{"kinds":["group","BOGUS"]}`, "agent:main:telegram:group:g1"},
		{`{"kinds":["bogus"]}`, "agent:main:main,agent:main:telegram:group:g1,agent:main:subagent:x,agent:main:node-device"},
		{`{"label":"Ops Room"}`, "agent:main:telegram:group:g1"},
		{`{"label":"ops room"}`, ""},
		{`{"search":"WAR ROOM"}`, "agent:main:telegram:group:g1"},
		{`{"search":"subagent"}`, "agent:main:subagent:x"},
		{`{"agentId":"ops"}`, ""},
		{`{"agent_id":"main","limit":1}`, "agent:main:main"},
		{`{"agentId":" MAIN ","limit":"1"}`, "agent:main:main"}, // ids compare case-insensitively; integers may come as strings
		{`{"activeMinutes":60}`, "agent:main:main,agent:main:telegram:group:g1,agent:main:subagent:x"},
		{`{"archived":true}`, "agent:main:hook:deploy"},
		{`{"archived":"all","kinds":["hook"]}`, "agent:main:hook:deploy"},
		{`{"pinned":true}`, "agent:main:main"},
		{`{"pinned":false,"excludeSubagents":true}`, "agent:main:telegram:group:g1,agent:main:node-device"},
		{`{"group":"g"}`, "agent:main:subagent:x"},
		{`{"kinds":["node"]}`, "agent:main:node-device"},
		{`{"ownerId":"u1","projectId":"p1"}`, "agent:main:subagent:x"},
		{`{"creator_id":"c1","workspaceDir":"/w"}`, "agent:main:subagent:x"},
		{`{"ownerId":"u2"}`, ""},
	}
	for _, c := range cases {
		res := s.MustCall(mainKey, "sessions_list", c.params)
		if got := strings.Join(keys(t, res), ","); got != c.want {
			t.Errorf("%s: got %q, want %q", c.params, got, c.want)
		}
	}
}

func TestListPagination(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "agent" })
	var es []*sessions.Entry
	for i := 0; i < 250; i++ {
		es = append(es, &sessions.Entry{Key: fmt.Sprintf("agent:main:s%03d", i)})
	}
	seed(s, es...)
	res := s.MustCall(mainKey, "sessions_list", `{"limit":500}`)
	if res["count"].(float64) != 200 || res["limitApplied"].(float64) != 200 || res["hasMore"] != true || res["nextOffset"].(float64) != 200 {
		t.Fatalf("limit 500: count=%v limitApplied=%v hasMore=%v nextOffset=%v", res["count"], res["limitApplied"], res["hasMore"], res["nextOffset"])
	}
	res = s.MustCall(mainKey, "sessions_list", `{}`)
	if res["count"].(float64) != 100 || res["nextOffset"].(float64) != 100 {
		t.Fatalf("default limit: %v %v", res["count"], res["nextOffset"])
	}
	res = s.MustCall(mainKey, "sessions_list", `{"offset":240,"limit":5}`)
	if got := strings.Join(keys(t, res), ","); got != "agent:main:s240,agent:main:s241,agent:main:s242,agent:main:s243,agent:main:s244" || res["nextOffset"].(float64) != 245 {
		t.Fatalf("offset page = %s next=%v", got, res["nextOffset"])
	}
	res = s.MustCall(mainKey, "sessions_list", `{"offset":245,"limit":10}`)
	if res["count"].(float64) != 5 || res["hasMore"] != false {
		t.Fatalf("last page: %v", res)
	}
	if _, ok := res["nextOffset"]; ok {
		t.Fatal("nextOffset present without hasMore")
	}
	res = s.MustCall(mainKey, "sessions_list", `{"offset":1000}`)
	if res["count"].(float64) != 0 || len(res["sessions"].([]any)) != 0 {
		t.Fatalf("past the end: %v", res)
	}
}

func TestListMessagesAndPreviews(t *testing.T) {
	s := handlerstest.Start(t, nil)
	var lines []string
	for i := 0; i < 30; i++ {
		lines = append(lines, fmt.Sprintf(`{"role":"user","content":"question %d"}`, i))
		lines = append(lines, fmt.Sprintf(`{"role":"toolResult","content":"tool %d"}`, i))
		lines = append(lines, fmt.Sprintf(`{"role":"assistant","content":"<thinking>secret plan</thinking>answer %d with TOKEN=abcdefghijklmnopqrstuvwxyz"}`, i))
	}
	s.Import(importer.ImportOptions{SessionKey: mainKey}, lines...)
	res := s.MustCall(mainKey, "sessions_list", `{"messageLimit":50,"includeDerivedTitles":true,"includeLastMessage":true}`)
	m := row(t, res, mainKey)
	msgs := m["messages"].([]any)
	// messageLimit is capped at 20 entries; tool messages among them are dropped
	if len(msgs) == 0 || len(msgs) > 20 {
		t.Fatalf("messages = %d", len(msgs))
	}
	for _, raw := range msgs {
		mm := raw.(map[string]any)
		if mm["role"] == "toolResult" {
			t.Fatal("tool message in sessions_list messages")
		}
		if c, _ := mm["content"].(string); strings.Contains(c, "secret plan") || strings.Contains(c, "abcdefghijklmnopqrstuvwxyz") {
			t.Fatalf("unsanitized message: %v", c)
		}
	}
	if m["derivedTitle"] != "question 0" {
		t.Fatalf("derivedTitle = %v", m["derivedTitle"])
	}
	if p, _ := m["lastMessagePreview"].(string); !strings.HasPrefix(p, "answer 29") || strings.Contains(p, "secret plan") || strings.Contains(p, "abcdefghijklmnopqrstuvwxyz") {
		t.Fatalf("lastMessagePreview = %q", p)
	}
	res = s.MustCall(mainKey, "sessions_list", `{"messageLimit":3}`)
	if got := len(row(t, res, mainKey)["messages"].([]any)); got != 2 {
		t.Fatalf("messageLimit 3 over user,tool,assistant = %d messages, want 2", got)
	}
}

func TestListByteBudget(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "agent" })
	big := strings.Repeat("x", 3000)
	var es []*sessions.Entry
	for i := 0; i < 60; i++ {
		es = append(es, &sessions.Entry{Key: fmt.Sprintf("agent:main:s%02d", i), DisplayName: big})
	}
	seed(s, es...)
	res := s.MustCall(mainKey, "sessions_list", `{"limit":60}`)
	n := int(res["count"].(float64))
	if res["truncationReason"] != "byte-limit" || n == 0 || n >= 60 || res["nextOffset"].(float64) != float64(n) || res["hasMore"] != true {
		t.Fatalf("budget: count=%d reason=%v next=%v", n, res["truncationReason"], res["nextOffset"])
	}
	if _, ok := res["enrichmentOmitted"]; ok {
		t.Fatal("enrichment dropped although the first row fit")
	}
	// a first row that only fits without its previews
	s2 := handlerstest.Start(t, nil)
	var lines []string
	for i := 0; i < 20; i++ {
		lines = append(lines, fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("y", 3900)))
	}
	s2.Import(importer.ImportOptions{SessionKey: mainKey}, lines...)
	res = s2.MustCall(mainKey, "sessions_list", `{"messageLimit":20}`)
	if res["enrichmentOmitted"] != true || res["count"].(float64) != 1 {
		t.Fatalf("enrichmentOmitted: %v", res)
	}
	if _, ok := row(t, res, mainKey)["messages"]; ok {
		t.Fatal("messages kept although enrichment was omitted")
	}
	// one bare row over 64 KiB
	s3 := handlerstest.Start(t, nil)
	seed(s3, &sessions.Entry{Key: mainKey, DisplayName: strings.Repeat("z", 70*1024)})
	_, err := s3.Call(mainKey, "sessions_list", `{}`)
	if e, ok := bus.AsError(err); !ok || e.Code != 400 || e.Message != "Session metadata exceeds the 64 KiB result budget even without previews; use a narrower inventory query" {
		t.Fatalf("oversized row: %v", err)
	}
}

func TestListThrownErrors(t *testing.T) {
	s := handlerstest.Start(t, nil)
	cases := map[string]string{
		`{"limit":0}`:                "limit must be a positive integer",
		`{"limit":-1}`:               "limit must be a positive integer",
		`{"limit":1.5}`:              "limit must be a positive integer",
		`{"limit":"abc"}`:            "limit must be a positive integer",
		`{"offset":-3}`:              "offset must be a non-negative integer",
		`{"activeMinutes":0}`:        "activeMinutes must be a positive integer",
		`{"messageLimit":-1}`:        "messageLimit must be a non-negative integer",
		`{"relationship":"friends"}`: "relationship must be owned, created, or involving",
		`{"relationship":"owned"}`:   "relationship requires an authenticated requesting user; use an explicit ownerId or creatorId instead",
		`{"activeOnly":true}`:        "activeOnly requires a Gateway-backed inventory with live run state",
		`{"archived":"maybe"}`:       `archived must be true, false or "all"`,
		`{"pinned":"yes"}`:           "pinned must be a boolean: send true or false, not a string",
		`{"pinned":"true"}`:          "pinned must be a boolean: send true or false, not a string",
		`{"excludeSubagents":1}`:     "excludeSubagents must be a boolean: send true or false",
		`{"limit":"1.5"}`:            "limit must be a positive integer",
		`{"agentId":">"}`:            `agentId ">" is not a valid agent id: it contains ">", a NATS wildcard; an agent id is 1 to 64 letters, digits, "_" or "-", starting with a letter or digit, as in agents.list (e.g. "main")`,
		`{"agent_id":"ops.*"}`:       `agentId "ops.*" is not a valid agent id: it contains "."; an agent id is 1 to 64 letters, digits, "_" or "-", starting with a letter or digit, as in agents.list (e.g. "main")`,
		`{"kinds":[1]}`:              "kinds must be an array of strings",
		`{"label":7}`:                "label must be a string",
		`{"agentId":"` + strings.Repeat("a", 65) + `"}`: "agentId must be at most 64 characters (got 65)",
	}
	for params, want := range cases {
		_, err := s.Call(mainKey, "sessions_list", params)
		e, ok := bus.AsError(err)
		if !ok || e.Code != 400 || e.Message != want {
			t.Errorf("%s: got %v, want 400 %q", params, err, want)
		}
	}
	if _, err := s.Call(mainKey, "sessions_list", `{"limit":`); err == nil {
		t.Error("malformed JSON: no error, want a 400")
	} else if e, ok := bus.AsError(err); !ok || e.Code != 400 || !strings.HasPrefix(e.Message, "invalid JSON: ") {
		t.Errorf("malformed JSON: got %v, want a 400", err)
	}
	for body, kind := range map[string]string{`null`: "null", `[1,2]`: "an array", `"text"`: "a string", `5`: "a number"} {
		_, err := s.Call(mainKey, "sessions_list", body)
		want := "request body must be a JSON object of tool parameters, not " + kind + `; send {} to call without parameters, or e.g. {"sessionKey":"agent:main:main"}`
		if e, ok := bus.AsError(err); !ok || e.Code != 400 || e.Message != want {
			t.Errorf("%s: got %v, want 400 %q", body, err, want)
		}
	}
	// an empty body is a call without parameters
	if res, err := s.Call(mainKey, "sessions_list", ``); err != nil || res["sessions"] == nil {
		t.Errorf("empty body: %v %v", res, err)
	}
}

// A row carries the session's stateVersion (its signal-log head) when it
// is not zero, as the reference's sessions_list does; a session with no
// events has none.
func TestListStateVersion(t *testing.T) {
	s := handlerstest.Start(t, nil)
	now := time.Now().UnixMilli()
	child := "agent:main:subagent:sv"
	s.Put(&sessions.Entry{Key: mainKey, AgentID: "main", UpdatedAt: now})
	s.Put(&sessions.Entry{Key: child, AgentID: "main", SpawnedBy: mainKey, UpdatedAt: now - 1})
	d := s.Worker.Deps
	ev, err := d.Notices.Record(bustest.Context(t), signals.Event{
		DedupeKey: "test:1", SessionKey: child, AgentID: "main", Kind: signals.KindCompacted,
		ActorType: signals.ActorSystem, Summary: "session compacted",
	})
	if err != nil || ev.Sequence == 0 {
		t.Fatalf("record: %+v %v", ev, err)
	}
	bustest.WaitFor(t, 10*time.Second, "the worker sees the new head", func() bool {
		return d.Heads.StateVersion(child) == ev.Sequence
	})
	res := s.MustCall(mainKey, "sessions_list", `{}`)
	if v := row(t, res, child)["stateVersion"]; v != float64(ev.Sequence) {
		t.Fatalf("child row stateVersion %v, want %d", v, ev.Sequence)
	}
	if v, ok := row(t, res, mainKey)["stateVersion"]; ok {
		t.Fatalf("a session without events has stateVersion %v, want none", v)
	}
}
