package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// TestSessionGoalCommand: `sessionbus session goal KEY "text"` sets the
// goal with the operator as its actor, `--clear KEY` clears it; an empty
// text, an unknown key and a bad key exit 1 with the worker's message,
// and a wrong arity is a usage error.
func TestSessionGoalCommand(t *testing.T) {
	const key = "agent:main:main"
	st := startSessionCmd(t, nil, key)
	goal := func(args ...string) (int, string, string) { return st.session("goal", args...) }
	stored := func() *sessions.Goal { return st.stored(t, key).Rares().Goal }

	code, out, errs := goal("--actor", "alice", key, "get CI green")
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res["status"] != "set" || !strings.Contains(errs, "goal of agent:main:main: set") {
		t.Fatalf("set: exit %d %s %s", code, out, errs)
	}
	if g := stored(); !g.Active() || g.Objective != "get CI green" || g.ActorID != "alice" || g.Channel != "ops" {
		t.Fatalf("stored goal %+v", g)
	}

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{key, "  "}, 1, `"code":400,"error":"the goal text is empty`},
		{[]string{"agent:main:nobody", "x"}, 1, `"code":404,"error":"unknown session agent:main:nobody`},
		{[]string{"agent:main:a b", "x"}, 1, `"code":400`},
		{[]string{key, strings.Repeat("x", handlers.GoalMaxChars+1)}, 1, `at most 16000`},
		{[]string{key}, 2, "usage: sessionbus session"},
		{[]string{"--clear", key, "text"}, 2, "usage: sessionbus session"},
	} {
		code, _, errs := goal(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.msg) {
			t.Fatalf("%.60q: exit %d %.300s, want %d %q", tc.args, code, errs, tc.code, tc.msg)
		}
	}
	if g := stored(); !g.Active() || g.Objective != "get CI green" {
		t.Fatalf("a refused command changed the goal: %+v", g)
	}

	if code, out, errs := goal("--clear", "--actor", "bob", key); code != 0 || !strings.Contains(out, `"status": "cleared"`) {
		t.Fatalf("clear: exit %d %s %s", code, out, errs)
	}
	if g := stored(); g.Status != sessions.GoalCleared || g.ActorID != "bob" || g.Objective != "" || g.UpdatedAt == 0 {
		t.Fatalf("cleared goal %+v", g)
	}
}
