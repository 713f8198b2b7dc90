package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
)

// buildHostileAgent builds testdata/hostileagent into a directory every
// user may enter, so a turn run as another user can start it.
func buildHostileAgent(t *testing.T) string {
	t.Helper()
	dir := openDir(t, 0o755)
	out := filepath.Join(dir, "hostileagent")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/hostileagent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build hostileagent: %v\n%s", err, b)
	}
	return out
}

// openDir is a temp dir with mode perm whose parent every user may enter.
func openDir(t *testing.T, perm os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	for d, m := range map[string]os.FileMode{filepath.Dir(dir): 0o755, dir: perm} {
		if err := os.Chmod(d, m); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// secretsOf are the secret lines of the deployment's key and credentials
// files: every seed (operator, accounts, users, the token key).
func secretsOf(t *testing.T, data string) []string {
	t.Helper()
	var out []string
	files, _ := filepath.Glob(filepath.Join(data, "nats-auth", "*.nk"))
	files = append(files, filepath.Join(data, "operator.creds"), filepath.Join(data, "creds", "admin.creds"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); len(l) > 40 && (strings.HasPrefix(l, "SO") || strings.HasPrefix(l, "SA") || strings.HasPrefix(l, "SU")) {
				out = append(out, l)
			}
		}
	}
	if len(out) < 4 {
		t.Fatalf("found %d seeds in %s, want the operator's, the accounts', the admin's and the token key", len(out), data)
	}
	return out
}

// An exec agent that tries to get out of its run, under serve --auth, with
// exactly what its run gives it: it can call tools as its own session,
// under its own policy, and nothing else. No connection without
// credentials, no JetStream API, no run forged into the queue, no
// subscription to other connections' traffic, deliveries or notices, no
// older run's credentials or token, and (run as another OS user, when the
// test is root) none of the gateway's files or environment. No secret of
// the deployment or the gateway reaches it, and a connection it keeps open
// past its run is closed when the run ends.
func TestHostileExecAgent(t *testing.T) {
	sb := binary(t, "sessionbus")
	agent := buildHostileAgent(t)
	asRoot := os.Geteuid() == 0
	data := t.TempDir()
	stash := openDir(t, 0o777)
	const planted = "sk-hostile-test-planted-key-0123456789"
	t.Setenv("OPENAI_API_KEY", planted)

	// as root the turn runs as nobody and tries the data dir and the
	// gateway's environment, which the same user could read
	env := `{HOSTILE_STASH: "` + stash + `"}`
	execUser := ""
	var nobody *user.User
	if asRoot {
		var err error
		if nobody, err = user.Lookup("nobody"); err != nil {
			t.Fatal("running as root but no user nobody:", err)
		}
		env = `{HOSTILE_STASH: "` + stash + `", HOSTILE_DATA: "` + data + `"}`
		execUser = "\n        user: nobody"
	}
	cfgPath := filepath.Join(t.TempDir(), "sessionbus.yaml")
	cfg := `
tools:
  sessions: {visibility: all}
  agentToAgent: {enabled: true, allow: ["*"]}
session:
  agentToAgent: {maxPingPongTurns: 0}
agents:
  list:
    - id: main
      runtime: script
      script: {rules: [{reply: "REPLY_SKIP"}]}
    - id: hostile
      runtime: exec
      tools: {deny: [sessions_spawn]}
      exec:
        command: ["` + agent + `"]
        timeoutSeconds: 60
        env: ` + env + execUser + "\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, "serve", "--auth", "--data", data, "--listen", anyPort, "--config", cfgPath)
	url, _ := srv.ready(t)
	creds := filepath.Join(data, "operator.creds")
	secrets := append(secretsOf(t, data), planted)

	reports := map[string]map[string]string{}
	for _, key := range []string{"agent:hostile:one", "agent:hostile:two"} {
		if _, errOut, code := run(t, `{"role":"user","content":"hello"}`, sb, "import", "--server", url, "--creds", creds, key); code != 0 {
			t.Fatalf("import %s: %d %s", key, code, errOut)
		}
		out, errOut, code := run(t, "", sb, "call", "--server", url, "--creds", creds, "sessions_send", `{"sessionKey":"`+key+`","message":"go","timeoutSeconds":60}`)
		var res map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res["status"] != "ok" || res["reply"] == "" {
			t.Fatalf("send to %s: %d %s %s", key, code, out, errOut)
		}
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Fatalf("the reply of %s holds the secret %.12s...", key, s)
			}
		}
		reports[key] = newReport(t, stash, reports)
	}

	one, two := reports["agent:hostile:one"], reports["agent:hostile:two"]
	for key, rep := range reports {
		checkHostileReport(t, key, rep, asRoot)
		if asRoot && rep["uid"] != nobody.Uid {
			t.Errorf("%s ran as uid %s, want nobody's %s", key, rep["uid"], nobody.Uid)
		}
	}
	older := 0
	for k, v := range two {
		switch {
		case strings.HasPrefix(k, "older_creds "):
			older++
			if !strings.Contains(strings.ToLower(v), "authorization violation") {
				t.Errorf("run two with run one's credentials: %s", v)
			}
		case strings.HasPrefix(k, "older_token "):
			older++
			if !strings.HasPrefix(v, "refused: 401") {
				t.Errorf("run two with run one's token (another session's): %s", v)
			}
		}
	}
	if older != 2 {
		t.Fatalf("run two tried %d of run one's credentials and token, want both: %v", older, two)
	}
	if !strings.HasPrefix(one["linger"], "connected") || two["linger"] != "" {
		t.Fatalf("run one's lingering child: %q", one["linger"])
	}
	lingered, _ := filepath.Glob(filepath.Join(stash, "*.linger"))
	bustest.WaitFor(t, 30*time.Second, "the connection kept past run one closed", func() bool {
		if len(lingered) == 0 {
			lingered, _ = filepath.Glob(filepath.Join(stash, "*.linger"))
			return false
		}
		b, _ := os.ReadFile(lingered[0])
		return len(b) > 0
	})
	if b, _ := os.ReadFile(lingered[0]); !strings.Contains(string(b), "revoked") {
		t.Fatalf("run one's connection after the run: %s", b)
	}
	files, _ := filepath.Glob(filepath.Join(stash, "*.report.json"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Fatalf("%s holds the secret %.12s...", f, s)
			}
		}
	}
}

// newReport reads the one report in stash that is not among seen.
func newReport(t *testing.T, stash string, seen map[string]map[string]string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(stash, "*.report.json"))
	if len(files) != len(seen)+1 {
		t.Fatalf("%d reports after %d runs", len(files), len(seen)+1)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rep map[string]string
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		known := false
		for _, r := range seen {
			known = known || r["env"] == rep["env"]
		}
		if !known {
			return rep
		}
	}
	t.Fatal("no new report")
	return nil
}

// checkHostileReport checks the attempts every run makes.
func checkHostileReport(t *testing.T, key string, rep map[string]string, asRoot bool) {
	t.Helper()
	want := func(what, got string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %s: %q", key, what, got)
		}
	}
	lower := func(k string) string { return strings.ToLower(rep[k]) }
	want("connect without credentials", rep["connect_without_creds"], strings.Contains(lower("connect_without_creds"), "authorization violation"))
	want("connect with its own credentials", rep["connect_own"], rep["connect_own"] == "allowed")
	want("its own tool call", rep["own_tool_call"], strings.HasPrefix(rep["own_tool_call"], "allowed: ") && strings.Contains(rep["own_tool_call"], `"sessionKey":"`+key+`"`))
	want("a tool its policy denies", rep["own_policy_denied_tool"], strings.HasPrefix(rep["own_policy_denied_tool"], "refused: 403"))
	for _, k := range []string{"subscribe >", "subscribe _INBOX.>", "subscribe sb.deliver.>", "subscribe sb.session.*.announce", "subscribe sb.tools.>",
		"request $JS.API.STREAM.LIST", "request $JS.API.STREAM.MSG.GET.SB_TRANSCRIPTS", "request $JS.API.DIRECT.GET.SB_TRANSCRIPTS", "publish sb.runs.main"} {
		want(k, rep[k], rep[k] == "refused: permissions violation")
	}
	env := rep["env"]
	for _, v := range []string{"SESSIONBUS_CREDS=", "SESSIONBUS_TOKEN=", "SESSIONBUS_SERVER=nats://", "SESSIONBUS_INBOX=_INBOX.U"} {
		want("its environment has "+v, env, strings.Contains(env, v))
	}
	want("its environment has no OPENAI_API_KEY", env, !strings.Contains(env, "OPENAI_API_KEY"))
	reads := 0
	for k, v := range rep {
		switch {
		case strings.HasPrefix(k, "read_relative "):
			reads++
			want(k, v, strings.Contains(v, "no such file"))
		case strings.HasPrefix(k, "read_data "), k == "read_gateway_environ":
			reads++
			want(k, v, strings.Contains(v, "permission denied"))
		}
	}
	wantReads := 4
	if asRoot {
		wantReads = 8
	}
	want("file reads tried", rep["env"], reads == wantReads)
}
