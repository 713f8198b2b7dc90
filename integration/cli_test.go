package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLIContract runs the real binaries: serve, import, call, token, the
// stock nats CLI, and the error and shutdown paths of serve.
func TestCLIContract(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	srv := start(t, "serve", "--data", data, "--listen", anyPort)
	// the ready line names the port the server bound (checked by boundURL)
	url, addr := boundURL(t, srv.waitLine(t, "ready "), "nats")
	creds := filepath.Join(data, "operator.creds")
	common := []string{"--server", url, "--creds", creds}

	// gateway: an ack wait too short to heartbeat is refused before it connects
	_, errOut, code := run(t, "", sb, "gateway", "--server", url, "--ack-wait", "200ms")
	if code != 2 || !strings.Contains(errOut, "--ack-wait 200ms is too short: use 1s or more") {
		t.Fatalf("gateway --ack-wait 200ms: code %d stderr %s", code, errOut)
	}

	// import: a bad line writes nothing
	_, errOut, code = run(t, "{\"role\":\"user\",\"content\":\"ok\"}\nnot json\n", sb, append([]string{"import"}, append(common, "agent:main:main")...)...)
	if code != 1 || !strings.Contains(errOut, `line 2 is not a JSON object`) || !strings.Contains(errOut, `"code":400`) {
		t.Fatalf("bad import: code %d stderr %s", code, errOut)
	}
	out, _, code := run(t, "", sb, append([]string{"call"}, append(common, "sessions_list", "{}")...)...)
	if code != 0 || !strings.Contains(out, `"count": 0`) {
		t.Fatalf("a failed import left a session: %s", out)
	}
	transcript := `{"type":"session","id":"x"}
{"type":"message","message":{"role":"user","content":"hello bus"}}
{"role":"assistant","content":"hi"}
`
	out, errOut, code = run(t, transcript, sb, append([]string{"import", "--label", "main"}, append(common, "agent:main:main")...)...)
	if code != 0 || !strings.Contains(out, `"imported": 2`) || !strings.Contains(out, `"skipped": 1`) {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	_, _, code = run(t, `{"role":"user","content":"child"}`, sb, append([]string{"import", "--spawned-by", "agent:main:main"}, append(common, "agent:main:subagent:k1")...)...)
	if code != 0 {
		t.Fatal("import child failed")
	}

	out, _, code = run(t, "", sb, append([]string{"call"}, append(common, "sessions_list", "{}")...)...)
	var list struct {
		Count    int `json:"count"`
		Sessions []struct {
			Key string `json:"key"`
		} `json:"sessions"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.Count != 2 {
		t.Fatalf("call sessions_list: %d %s", code, out)
	}
	out, _, code = run(t, "", sb, append([]string{"call", "--as", "agent:main:main", "--sandboxed"}, append(common, "sessions_list")...)...)
	if code != 0 || !strings.Contains(out, `"count": 1`) || !strings.Contains(out, `"key": "agent:main:subagent:k1"`) {
		t.Fatalf("a sandboxed main session sees only its spawned child: %s", out)
	}
	_, errOut, code = run(t, "", sb, append([]string{"call"}, append(common, "sessions_history", "{}")...)...)
	if code != 1 || strings.TrimSpace(errOut) != `{"code":400,"error":"sessionKey required"}` {
		t.Fatalf("thrown error: %d %q", code, errOut)
	}
	_, errOut, code = run(t, "", sb, append([]string{"call"}, append(common, "no_such_tool")...)...)
	if code != 1 || !strings.Contains(errOut, `"code":404`) {
		t.Fatalf("unknown tool: %d %q", code, errOut)
	}

	// the stock nats CLI with a minted token
	tok, _, code := run(t, "", sb, "token", "--creds", creds, "--as", "agent:main:main")
	if code != 0 || !strings.HasPrefix(tok, "ey") {
		t.Fatalf("token: %q", tok)
	}
	// as the README runs them: a tool request as the admin, reads as ops
	nats := binary(t, "nats")
	admin, ops := filepath.Join(data, "creds", "admin.creds"), filepath.Join(data, "creds", "ops.creds")
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", admin, "req", "sb.tools.sessions_history", `{"sessionKey":"main"}`, "-H", "Sessionbus-Token:"+strings.TrimSpace(tok), "--raw")
	if code != 0 || !strings.Contains(out, `"content":"hello bus"`) || !strings.Contains(out, `"sessionKey":"main"`) {
		t.Fatalf("nats req: %d %s %s", code, out, errOut)
	}
	out, _, code = run(t, "", nats, "-s", url, "--creds", admin, "req", "sb.tools.sessions_list", `{}`, "-H", "Sessionbus-Token:bogus")
	if code != 0 || !strings.Contains(out, "401") {
		t.Fatalf("nats req with a bad token: %d %s", code, out)
	}
	out, _, code = run(t, "", nats, "-s", url, "--creds", ops, "micro", "info", "sessionbus")
	if code != 0 || !strings.Contains(out, "sb.tools.sessions_list") || !strings.Contains(out, "sb.tools.sessions_history") {
		t.Fatalf("nats micro info: %d %s", code, out)
	}
	out, _, code = run(t, "", nats, "-s", url, "--creds", ops, "--js-api-prefix", "sb.ops.js", "stream", "get", "SB_TRANSCRIPTS", "--last-for", "sb.tr.agent.main.main")
	if code != 0 || !strings.Contains(out, `"content":"hi"`) {
		t.Fatalf("nats stream get: %d %s", code, out)
	}

	// without credentials the server refuses the stock CLI
	if _, errOut, code = run(t, "", nats, "-s", url, "stream", "ls"); code == 0 || !strings.Contains(errOut, "Authorization Violation") {
		t.Fatalf("nats without --creds: %d %s", code, errOut)
	}

	// a second serve on the same data dir, and one on a taken port
	_, errOut, code = run(t, "", sb, "serve", "--data", data, "--listen", anyPort)
	if code == 0 || !strings.Contains(errOut, "in use by another sessionbus serve") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("second serve: %d %q", code, errOut)
	}
	_, errOut, code = run(t, "", sb, "serve", "--data", t.TempDir(), "--listen", addr)
	if code == 0 || !strings.Contains(errOut, "cannot listen on "+addr) {
		t.Fatalf("taken port: %d %q", code, errOut)
	}

	// SIGTERM drains and exits 0
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.done:
		if err != nil {
			t.Fatalf("serve exit after SIGTERM: %v; stderr %s", err, srv.errText())
		}
		srv.done <- nil // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
}

// TestServeDemo runs the README's first command (on a temp dir and a port
// the server picks) and checks the scenario shows the tools working end to
// end.
func TestServeDemo(t *testing.T) {
	data := t.TempDir()
	p := start(t, "serve", "--demo", "--data", data, "--listen", anyPort)
	// up to the first nats CLI line: the scenario and the sessionbus
	// commands of "try it yourself"
	line, out := p.collect(t, "  nats")
	_, addr := readyIn(t, out)
	creds := filepath.Join(data, "operator.creds")
	for _, want := range []string{
		"ready nats://" + addr,
		"demo: imported 6 sample sessions",
		`"warning": "Session visibility is restricted (effective tools.sessions.visibility=agent`,
		`"mode": "tree"`, // the sandboxed sub-agent
		`"reply": "v2 ships Friday."`,
		"sb.deliver.discord",
		`"message": "Release update: v2 ships Friday (confirmed with the main session)."`,
		`"to": "group:release-team"`,
		`Thanks! I'll tell the team it ships Friday.`,
		`"lastMessagePreview": "All green."`,
		`OPENAI_API_KEY=sk-dem…mnop`,
		`"contentRedacted": true`,
		`"text": "I'll split the work: research and writing."`,
		`"status": "forbidden"`,
		"thrown error, code 400: limit must be a positive integer",
		// sub-agents: spawned in one turn that yields, three announces
		// delivered, the tree, the summary the human asks for
		`$ sessionbus chat --channel terminal --from demo-user agent:main:main "Plan the v2 release notes"`,
		"(the turn yielded: run ",
		"announces delivered: 3 of 3",
		"Summary: 3 sub-agents so far.\nactive subagents:\n(none)\n",
		// notices: a human writes to a child; its parent reconciles
		"Will do: check the docs PRs.",
		"sb.session.agent.main.main.notice\nSession \"agent:main:subagent:",
		`changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:subagent:`,
		"; follow-up notices: none\nnotices received by agent:main:main: 1\n",
		"== try it yourself",
		`sessions_spawn '{"task":"list the open v2 bugs","label":"bugs"}'`,
		`subagents '{"action":"list"}'`,
		`session_status '{"sessionKey":"agent:main:subagent:`,
		`chat --server nats://` + addr,
		// the printed commands carry the admin's credentials
		"--creds " + creds + " sessions_list",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	for _, c := range []struct {
		what string
		n    int
	}{
		{"outcome ok, announce delivered to agent:main:main by gateway serve", 3},
		{`status done, "announce": {"state":"delivered"}`, 3},
		// the tree and the summary, each listing the three children
		{"· announce delivered", 6},
		{") done - collect the merged PRs since v1 · announce delivered\n", 2},
		{") done - draft the release notes · announce delivered\n", 2},
		{") done - check the links in the docs · announce delivered\n", 2},
	} {
		if got := strings.Count(out, c.what); got != c.n {
			t.Errorf("demo output has %q %d times, want %d", c.what, got, c.n)
		}
	}
	// the delta the parent read: the child's run and the human's message
	// since the parent's cursor (the spawn), and no gap
	_, delta, _ := strings.Cut(out, `"stateChanges": {`)
	delta, _, _ = strings.Cut(delta, "notices received")
	for _, want := range []string{`"kind": "run_completed"`, `"kind": "human_direct_message"`, `"actorId": "demo-user"`, `"channel": "terminal"`, `"historyGap": false`} {
		if !strings.Contains(delta, want) {
			t.Errorf("the stateChanges block lacks %q:\n%s", want, delta)
		}
	}
	for _, leak := range []string{"sk-demo1234567890abcdefghijklmnop", "<thinking>", "<tool_call>"} {
		if strings.Contains(out, leak) {
			t.Errorf("demo output shows %q, which sessions_history must filter", leak)
		}
	}
	if t.Failed() {
		t.Log(out)
		return
	}
	// the printed nats line has credentials, and they work
	if !strings.Contains(line, "--creds ") {
		t.Fatalf("the nats CLI line has no credentials: %s", line)
	}
	nats := binary(t, "nats")
	if out, errOut, code := run(t, "", nats, "-s", "nats://"+addr, "--creds", creds, "stream", "get", "SB_TRANSCRIPTS", "--last-for", "sb.tr.agent.main.main"); code != 0 {
		t.Fatalf("the printed nats command with the admin's file: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := run(t, "", nats, "-s", "nats://"+addr, "stream", "ls"); code == 0 {
		t.Fatalf("a nats CLI without credentials got in: %s", errOut)
	}
}
