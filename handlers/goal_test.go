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
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

const goalChild = "agent:main:subagent:goal"

// goalOp sends sb.ops.session.goal with body.
func goalOp(t *testing.T, s *handlerstest.Stack, c bus.Caller, body map[string]any) (map[string]any, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	reply, err := bus.SessionOp(bustest.Context(t), s.Conn, bus.NewNames(""), "goal", s.Token(c), b)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(reply, &out); err != nil {
		t.Fatalf("reply %s: %v", reply, err)
	}
	return out, nil
}

func startGoals(t *testing.T) *handlerstest.Stack {
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.Sessions.Visibility = "all" })
	now := time.Now().UnixMilli()
	s.Put(&sessions.Entry{Key: "agent:main:main", AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now})
	s.Put(&sessions.Entry{Key: goalChild, AgentID: "main", SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now,
		SpawnedBy: "agent:main:main", LastChannel: "slack"})
	return s
}

// goalEvents is the goal_changed events of key after since, as
// session_status changesSince shows them.
func goalEvents(t *testing.T, s *handlerstest.Stack, key string, since uint64) []map[string]any {
	t.Helper()
	res := s.MustCall("agent:main:main", "session_status", fmt.Sprintf(`{"sessionKey":%q,"changesSince":%d}`, key, since))
	var out []map[string]any
	for _, e := range res["stateChanges"].(map[string]any)["events"].([]any) {
		if m := e.(map[string]any); m["kind"] == "goal_changed" {
			out = append(out, m)
		}
	}
	return out
}

// listGoal is the goal of key's sessions_list row (nil: none).
func listGoal(t *testing.T, s *handlerstest.Stack, key string) map[string]any {
	t.Helper()
	for _, r := range s.MustCall("agent:main:main", "sessions_list", `{}`)["sessions"].([]any) {
		if row := r.(map[string]any); row["key"] == key {
			g, _ := row["goal"].(map[string]any)
			return g
		}
	}
	t.Fatalf("no row for %s", key)
	return nil
}

// waitGoalIndexed waits until the worker's index, which session_status and
// sessions_list read, holds goalChild's goal in status: the index takes a
// write from its bucket watch a moment after the op answered.
func waitGoalIndexed(t *testing.T, s *handlerstest.Stack, status string) {
	t.Helper()
	bustest.WaitFor(t, 10*time.Second, "the index to hold the goal "+status, func() bool {
		e := s.Worker.Deps.Index.Get(goalChild)
		return e != nil && e.Rares().Goal != nil && e.Rares().Goal.Status == status
	})
}

// TestGoalOps: set, update and clear a goal on sb.ops.session.goal. Each
// change is in session_status's JSON (a clear keeps who and when), in the
// sessions_list row while active, and one goal_changed event with its
// actor; a repeat changes nothing and logs nothing.
func TestGoalOps(t *testing.T) {
	s := startGoals(t)
	ops := bus.Caller{Adapter: bus.AnyChannel}

	res, err := goalOp(t, s, ops, map[string]any{"sessionKey": goalChild, "goal": "  get CI green\nand push  ", "actor": "alice"})
	if err != nil || res["status"] != "set" || res["stateVersion"] == nil {
		t.Fatalf("set: %v %v", res, err)
	}
	waitGoalIndexed(t, s, "active")
	g := s.MustCall("agent:main:main", "session_status", fmt.Sprintf(`{"sessionKey":%q}`, goalChild))["goal"].(map[string]any)
	if g["objective"] != "get CI green\nand push" || g["status"] != "active" || g["actorId"] != "alice" || g["actorType"] != "human" ||
		g["channel"] != "ops" || g["createdAt"] == nil || g["updatedAt"] != g["createdAt"] {
		t.Fatalf("session_status goal %v", g)
	}
	if lg := listGoal(t, s, goalChild); lg["objective"] != "get CI green\nand push" {
		t.Fatalf("sessions_list goal %v", lg)
	}
	if lg := listGoal(t, s, "agent:main:main"); lg != nil {
		t.Fatalf("a session without a goal lists one: %v", lg)
	}

	if res, err = goalOp(t, s, ops, map[string]any{"sessionKey": goalChild, "goal": "get CI green\nand push"}); err != nil || res["status"] != "unchanged" {
		t.Fatalf("same objective again: %v %v", res, err)
	}
	if res, err = goalOp(t, s, bus.Caller{Adapter: "slack"}, map[string]any{"sessionKey": goalChild, "goal": "ship 1.2"}); err != nil || res["status"] != "updated" {
		t.Fatalf("update by the session's channel adapter: %v %v", res, err)
	}
	if res, err = goalOp(t, s, ops, map[string]any{"sessionKey": goalChild, "clear": true, "actor": "bob"}); err != nil || res["status"] != "cleared" {
		t.Fatalf("clear: %v %v", res, err)
	}
	if res, err = goalOp(t, s, ops, map[string]any{"sessionKey": goalChild, "clear": true}); err != nil || res["status"] != "unchanged" {
		t.Fatalf("clear again: %v %v", res, err)
	}
	waitGoalIndexed(t, s, "cleared")
	g = s.MustCall("agent:main:main", "session_status", fmt.Sprintf(`{"sessionKey":%q}`, goalChild))["goal"].(map[string]any)
	if g["status"] != "cleared" || g["objective"] != nil || g["actorId"] != "bob" || g["updatedAt"] == nil {
		t.Fatalf("cleared goal %v", g)
	}
	if lg := listGoal(t, s, goalChild); lg != nil {
		t.Fatalf("a cleared goal lists: %v", lg)
	}

	evs := goalEvents(t, s, goalChild, 0)
	// an adapter's ops request is an ops change too
	want := []struct{ actor, summary string }{{"alice", "goal set via ops"}, {"adapter:slack", "goal updated via ops"}, {"bob", "goal cleared via ops"}}
	if len(evs) != len(want) {
		t.Fatalf("goal_changed events %v, want %d", evs, len(want))
	}
	for i, w := range want {
		if evs[i]["actorId"] != w.actor || evs[i]["summary"] != w.summary || evs[i]["actorType"] != "human" {
			t.Fatalf("event %d: %v, want actor %s, summary %q", i, evs[i], w.actor, w.summary)
		}
	}
}

// TestGoalOpsRefusals: bad input and other tokens are refused with one
// clear message, and nothing is written: no entry change, no event.
func TestGoalOpsRefusals(t *testing.T) {
	s := startGoals(t)
	ops := bus.Caller{Adapter: bus.AnyChannel}
	if _, err := goalOp(t, s, ops, map[string]any{"sessionKey": goalChild, "goal": "keep"}); err != nil {
		t.Fatal(err)
	}
	waitGoalIndexed(t, s, "active")
	before := s.MustCall("agent:main:main", "session_status", fmt.Sprintf(`{"sessionKey":%q}`, goalChild))
	long := strings.Repeat("é", handlers.GoalMaxChars+1)
	for _, tc := range []struct {
		c    bus.Caller
		body map[string]any
		code int
		msg  string
	}{
		{ops, map[string]any{"sessionKey": goalChild, "goal": long}, bus.CodeBadRequest, "at most 16000"},
		{ops, map[string]any{"sessionKey": goalChild, "goal": "  \n "}, bus.CodeBadRequest, "the goal text is empty"},
		{ops, map[string]any{"sessionKey": goalChild}, bus.CodeBadRequest, "the goal text is empty"},
		{ops, map[string]any{"sessionKey": goalChild, "goal": "x", "clear": true}, bus.CodeBadRequest, "not both"},
		{ops, map[string]any{"sessionKey": goalChild, "goal": "a\x00b"}, bus.CodeBadRequest, "control character"},
		{ops, map[string]any{"sessionKey": goalChild, "goal": 7}, bus.CodeBadRequest, "goal must be a string"},
		{ops, map[string]any{"sessionKey": "agent:main:nobody", "goal": "x"}, bus.CodeNotFound, "unknown session agent:main:nobody"},
		{ops, map[string]any{"sessionKey": "agent:main:a b", "goal": "x"}, bus.CodeBadRequest, "invalid"},
		{ops, map[string]any{"goal": "x"}, bus.CodeBadRequest, "sessionKey required"},
		{bus.Caller{SessionKey: "agent:main:main"}, map[string]any{"sessionKey": goalChild, "goal": "x"}, bus.CodeForbidden, ""},
		{bus.Caller{Adapter: "telegram"}, map[string]any{"sessionKey": goalChild, "goal": "x"}, bus.CodeForbidden, "channel"},
	} {
		_, err := goalOp(t, s, tc.c, tc.body)
		e, ok := bus.AsError(err)
		if !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Fatalf("%.80v as %+v: %v, want %d %q", tc.body, tc.c, err, tc.code, tc.msg)
		}
	}
	after := s.MustCall("agent:main:main", "session_status", fmt.Sprintf(`{"sessionKey":%q}`, goalChild))
	if fmt.Sprint(after["goal"]) != fmt.Sprint(before["goal"]) || after["stateVersion"] != before["stateVersion"] {
		t.Fatalf("a refusal wrote: goal %v -> %v, stateVersion %v -> %v", before["goal"], after["goal"], before["stateVersion"], after["stateVersion"])
	}
	if _, err := goalOp(t, s, ops, map[string]any{"sessionKey": goalChild, "goal": strings.Repeat("é", handlers.GoalMaxChars)}); err != nil {
		t.Fatalf("a goal of exactly %d characters: %v", handlers.GoalMaxChars, err)
	}
}

// TestGoalNotifiesParent: a goal change on a child publishes one notice to
// its parent, the producer-supplied watcher, as a human turn does.
func TestGoalNotifiesParent(t *testing.T) {
	s := startGoals(t)
	sub, err := s.Conn.SubscribeSync("sb.session.*.*.*.notice")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if _, err := goalOp(t, s, bus.Caller{Adapter: bus.AnyChannel}, map[string]any{"sessionKey": goalChild, "goal": "watch me"}); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("no notice: %v", err)
	}
	if msg.Subject != "sb.session.agent.main.main.notice" || !strings.Contains(string(msg.Data), goalChild) {
		t.Fatalf("notice on %s: %s", msg.Subject, msg.Data)
	}
}

// TestInboundGoal: `/goal <text>`, `/goal` and `/goal clear` as a human's
// whole message change or show the session's goal without queueing a run
// or touching the transcript; the answer is the reply and is delivered to
// the message's route like a turn's reply. The change's actor is the
// sender. Refused commands write nothing; "/goals ..." is an ordinary turn.
func TestInboundGoal(t *testing.T) {
	is := startInbound(t)
	tg := is.adapterToken("telegram")
	sub := deliverySub(t, is.Conn)
	msg := func(text string) string {
		b, _ := json.Marshal(map[string]any{"sessionKey": humanKey, "channel": "telegram", "from": "user42", "to": "group7", "text": text})
		return string(b)
	}

	for _, step := range []struct{ text, reply string }{
		{"/goal get CI green", "Goal set: get CI green"},
		{"  /goal   edit  get CI green and push ", "Goal updated: get CI green and push"},
		{"/goal", "Goal: get CI green and push\nSet by user42 via telegram, "},
		{"/goal clear", "Goal cleared."},
		{"/goal status", "No goal (cleared by user42 via telegram, "},
	} {
		res := is.mustInbound(tg, msg(step.text))
		if res["status"] != "ok" || !strings.HasPrefix(res["reply"].(string), step.reply) || res["runId"] == "" {
			t.Fatalf("%q: %v, want reply %q", step.text, res, step.reply)
		}
		subj, d := nextDelivery(t, sub)
		if subj != "sb.deliver.telegram" || d["message"] != res["reply"] || d["to"] != "group7" || d["runId"] != res["runId"] || d["sessionKey"] != humanKey {
			t.Fatalf("%q delivered on %s: %v", step.text, subj, d)
		}
	}
	if tr := is.transcript(humanKey); len(tr) != 0 {
		t.Fatalf("/goal wrote the transcript: %v", tr)
	}
	if h := is.humanTurns(); len(h) != 0 {
		t.Fatalf("/goal reported human turns: %v", h)
	}
	st := is.MustCall("agent:main:main", "session_status", fmt.Sprintf(`{"sessionKey":%q,"changesSince":0}`, humanKey))
	g := st["goal"].(map[string]any)
	if g["status"] != "cleared" || g["actorId"] != "user42" || g["channel"] != "telegram" {
		t.Fatalf("goal after /goal clear: %v", g)
	}
	var kinds []string
	for _, e := range st["stateChanges"].(map[string]any)["events"].([]any) {
		m := e.(map[string]any)
		kinds = append(kinds, fmt.Sprint(m["kind"], " ", m["actorId"], " ", m["summary"]))
	}
	if want := []string{"goal_changed user42 goal set via telegram", "goal_changed user42 goal updated via telegram", "goal_changed user42 goal cleared via telegram"}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("signal log %q, want %q", kinds, want)
	}

	// what a /goal writes: the session's entry, its signal log, a delivery
	// (the parent's notice turns go on meanwhile, writing elsewhere)
	written := func() string {
		_, rev, err := is.Worker.Deps.Store.Get(bustest.Context(t), humanKey)
		if err != nil {
			t.Fatal(err)
		}
		st := is.MustCall("agent:main:main", "session_status", fmt.Sprintf(`{"sessionKey":%q}`, humanKey))
		return fmt.Sprint(rev, " ", st["stateVersion"], " ", is.writes()[is.Worker.Deps.Names.DeliverStream()])
	}
	w1 := written()
	for _, tc := range []struct {
		key, text string
		code      int
		msg       string
	}{
		{humanKey, "/goal pause waiting for CI", 400, "/goal pause is not supported"},
		{humanKey, "/goal start  ", 400, "the goal text is empty"},
		{humanKey, "/goal " + strings.Repeat("x", handlers.GoalMaxChars+1), 400, "at most 16000"},
		{"agent:main:telegram:dm:nobody", "/goal x", 404, "unknown session"},
		{"agent:main:telegram:dm:nobody", "/goal", 404, "unknown session"},
	} {
		b, _ := json.Marshal(map[string]any{"sessionKey": tc.key, "channel": "telegram", "from": "user42", "text": tc.text})
		_, err := is.inbound(tg, string(b))
		if e, ok := bus.AsError(err); !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Fatalf("%q: %v, want %d %q", tc.text[:min(len(tc.text), 40)], err, tc.code, tc.msg)
		}
	}
	if w := written(); w != w1 {
		t.Fatalf("a refused /goal wrote: %v -> %v", w1, w)
	}

	// an ordinary turn, run in the session's lane after anything queued
	// before it: so no /goal queued a turn if it is the first one there
	b, _ := json.Marshal(map[string]any{"sessionKey": humanKey, "channel": "telegram", "from": "user42", "text": "/goals are nice", "wait": true})
	if res := is.mustInbound(tg, string(b)); res["status"] == "accepted" {
		t.Fatalf("/goals ...: %v, want its turn's outcome", res)
	}
	var users []any
	for _, m := range is.transcript(humanKey) {
		if m["role"] == "user" {
			users = append(users, m["content"])
		}
	}
	if len(users) != 1 || users[0] != "/goals are nice" {
		t.Fatalf("user turns %q, want only the ordinary message", users)
	}
}
