package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

// TestSessionToolsCommand: `sessionbus session tools KEY` prints the
// session's effective tool list with the stage and key that removed each
// missing tool (--json: the verdicts); an unknown key exits 1 with the
// worker's message, a missing key is a usage error.
func TestSessionToolsCommand(t *testing.T) {
	const key = "agent:main:side"
	st := startSessionCmd(t, func(cfg *config.Config) {
		cfg.Agents.Defaults.Sandbox.Mode = config.SandboxNonMain
		cfg.Tools.Deny = []string{"sessions_yield"}
	}, key)
	tools := func(args ...string) (int, string, string) { return st.session("tools", args...) }
	code, out, errs := tools(key)
	for _, want := range []string{
		"Tools of agent:main:side: 6 of 9 allowed",
		"sessions_search: removed by the profile stage (tools.alsoAllow)",
		"agents_list: removed by the sandbox stage (tools.sandbox.tools.allow (default))",
		"sessions_yield: removed by the global stage (tools.deny)",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, stdout lacks %q:\n%s\n%s", code, want, out, errs)
		}
	}
	code, out, _ = tools("--json", key)
	var res struct {
		Tools []struct {
			Tool, Stage string
			Allowed     bool
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || len(res.Tools) != 9 {
		t.Fatalf("--json: exit %d %v %s", code, err, out)
	}
	if code, _, errs := tools("agent:main:nobody"); code != 1 || !strings.Contains(errs, `"code":404,"error":"unknown session agent:main:nobody`) {
		t.Fatalf("unknown key: exit %d %s", code, errs)
	}
	if code, _, errs := tools(); code != 2 || !strings.Contains(errs, "usage: sessionbus session") {
		t.Fatalf("no key: exit %d %s", code, errs)
	}
}

// TestSessionSendPolicyCommand: `sessionbus session send-policy KEY
// on|off|inherit` stores the override; a bad word exits 1 with the
// worker's message, a missing word is a usage error.
func TestSessionSendPolicyCommand(t *testing.T) {
	const key = "agent:main:main"
	st := startSessionCmd(t, nil, key)
	sp := func(args ...string) (int, string, string) { return st.session("send-policy", args...) }
	stored := func() string { return st.stored(t, key).SendPolicy() }
	if code, out, errs := sp(key, "off"); code != 0 || !strings.Contains(out, `"sendPolicy": "deny"`) || !strings.Contains(errs, "send policy of agent:main:main: set") || stored() != "deny" {
		t.Fatalf("off: exit %d %s %s (stored %q)", code, out, errs, stored())
	}
	if code, _, errs := sp(key, "maybe"); code != 1 || !strings.Contains(errs, `send policy \"maybe\" must be on, off or inherit`) || stored() != "deny" {
		t.Fatalf("maybe: exit %d %s", code, errs)
	}
	if code, _, errs := sp(key); code != 2 || !strings.Contains(errs, "usage: sessionbus session") {
		t.Fatalf("no word: exit %d %s", code, errs)
	}
	if code, _, errs := sp(key, "inherit"); code != 0 || stored() != "" {
		t.Fatalf("inherit: exit %d %s (stored %q)", code, errs, stored())
	}
}

// TestSessionStopCommand: `sessionbus session stop KEY` with no turn
// running answers idle, exit 0; an unknown key exits 1 with the worker's
// message, a missing key or an extra word is a usage error.
func TestSessionStopCommand(t *testing.T) {
	const key = "agent:main:main"
	st := startSessionCmd(t, nil, key)
	stop := func(args ...string) (int, string, string) { return st.session("stop", args...) }
	if code, out, errs := stop(key); code != 0 || !strings.Contains(out, `"status": "idle"`) || !strings.Contains(errs, "no turn was running") {
		t.Fatalf("stop: exit %d %s %s", code, out, errs)
	}
	if code, _, errs := stop("agent:main:nobody"); code != 1 || !strings.Contains(errs, `"code":404,"error":"unknown session agent:main:nobody`) {
		t.Fatalf("unknown key: exit %d %s", code, errs)
	}
	for _, args := range [][]string{nil, {key, "now"}} {
		if code, _, errs := stop(args...); code != 2 || !strings.Contains(errs, "usage: sessionbus session") {
			t.Fatalf("%q: exit %d %s", args, code, errs)
		}
	}
}

// TestSessionPinCommand: `sessionbus session pin KEY` and `unpin KEY` set
// and clear the entry's pinned flag (a repeat is unchanged); an unknown
// key exits 1 with the worker's message, a missing key or an extra word is
// a usage error.
func TestSessionPinCommand(t *testing.T) {
	const key = "agent:main:main"
	st := startSessionCmd(t, nil, key)
	for _, step := range []struct {
		op, status string
		pinned     bool
	}{{"pin", "set", true}, {"pin", "unchanged", true}, {"unpin", "set", false}} {
		code, out, errs := st.session(step.op, key)
		if code != 0 || !strings.Contains(out, `"status": "`+step.status+`"`) || st.stored(t, key).Pinned != step.pinned {
			t.Fatalf("%s: exit %d %s %s (pinned %v)", step.op, code, out, errs, st.stored(t, key).Pinned)
		}
	}
	if code, _, errs := st.session("pin", "agent:main:nobody"); code != 1 || !strings.Contains(errs, `"code":404,"error":"unknown session agent:main:nobody`) {
		t.Fatalf("unknown key: exit %d %s", code, errs)
	}
	for _, args := range [][]string{nil, {key, "now"}} {
		if code, _, errs := st.session("unpin", args...); code != 2 || !strings.Contains(errs, "usage: sessionbus session") {
			t.Fatalf("%q: exit %d %s", args, code, errs)
		}
	}
}
