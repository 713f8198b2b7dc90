package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionbus/sessionbus/bus/auth"
)

// serve --insecure says the server is unauthenticated, lets anonymous
// clients in, and will not listen beyond loopback; serve --auth, the older
// form, is accepted and runs as the default does: anonymous clients are
// refused.
func TestServeInsecure(t *testing.T) {
	sb := binary(t, "sessionbus")
	_, errOut, code := run(t, "", sb, "serve", "--insecure", "--data", t.TempDir(), "--listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "is not a loopback address") || !strings.Contains(errOut, "drop --insecure") {
		t.Fatalf("serve --insecure on every interface: %d %q", code, errOut)
	}
	srv := start(t, "serve", "--insecure", "--no-gateway", "--data", t.TempDir(), "--listen", anyPort)
	_, addr := srv.ready(t)
	waitStderr(t, srv.cmd, "unauthenticated")
	nats := binary(t, "nats")
	if out, errOut, code := run(t, "", nats, "-s", "nats://"+addr, "stream", "ls", "--names"); code != 0 || !strings.Contains(out, "SB_TRANSCRIPTS") {
		t.Fatalf("anonymous nats stream ls under --insecure: %d %s %s", code, out, errOut)
	}

	old := start(t, "serve", "--auth", "--no-gateway", "--data", t.TempDir(), "--listen", anyPort)
	_, addr = old.ready(t)
	if _, errOut, code := run(t, "", nats, "-s", "nats://"+addr, "stream", "ls", "--names"); code == 0 || !strings.Contains(errOut, "Authorization Violation") {
		t.Fatalf("anonymous nats stream ls under serve --auth: %d %s", code, errOut)
	}
}

// serve writes one credentials file per role; call, chat and import
// connect with operator.creds, a worker and a gateway run as
// separate processes with theirs, the stock nats CLI calls a tool with the
// agent's, and a connection without credentials is refused.
func TestServeAuthCLI(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	srv := start(t, "serve", "--no-gateway", "--data", data, "--listen", anyPort)
	url, _ := srv.ready(t)
	waitStderr(t, srv.cmd, filepath.Join(data, "creds"))
	credsDir := filepath.Join(data, "creds")
	for _, r := range auth.Roles {
		st, err := os.Stat(filepath.Join(credsDir, string(r)+".creds"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s.creds: %v %v", r, st, err)
		}
	}
	creds := filepath.Join(data, "operator.creds")

	gw := start(t, "gateway", "--server", url, "--creds", filepath.Join(credsDir, "gateway.creds"), "--id", "gw-auth")
	gw.waitLine(t, "ready ")
	w := start(t, "worker", "--server", url, "--creds", filepath.Join(credsDir, "worker.creds"))
	w.waitLine(t, "ready ")

	_, errOut, code := run(t, `{"role":"user","content":"hello auth"}`, sb, "import", "--server", url, "--creds", creds, "agent:main:main")
	if code != 0 {
		t.Fatalf("import with operator.creds: %d %s", code, errOut)
	}
	out, errOut, code := run(t, "", sb, "call", "--server", url, "--creds", creds, "sessions_send", `{"sessionKey":"agent:main:main","message":"hi","timeoutSeconds":30}`)
	if code != 0 || !strings.Contains(out, `"status": "ok"`) {
		t.Fatalf("call sessions_send through the gateway process: %d %s %s", code, out, errOut)
	}

	out, errOut, code = run(t, "", sb, "chat", "--server", url, "--creds", creds, "agent:main:main", "hello from chat")
	if code != 0 || strings.TrimSpace(out) == "" {
		t.Fatalf("chat with operator.creds: %d %s %s", code, out, errOut)
	}

	// a token key alone (no NATS user) does not get in
	plain := filepath.Join(t.TempDir(), "token-only.creds")
	b, _ := os.ReadFile(creds)
	i := strings.Index(string(b), "-----BEGIN OPERATOR")
	if i < 0 {
		t.Fatalf("operator.creds holds no token key: %s", b)
	}
	if err := os.WriteFile(plain, b[i:], 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = run(t, "", sb, "call", "--server", url, "--creds", plain, "sessions_list")
	if code != 1 || !strings.Contains(strings.ToLower(errOut), "authorization violation") {
		t.Fatalf("call without a NATS user: %d %s", code, errOut)
	}

	// the agent's file with the stock nats CLI and a token
	agentCreds := filepath.Join(credsDir, "agent.creds")
	tok, _, code := run(t, "", sb, "token", "--creds", creds, "--as", "agent:main:main")
	if code != 0 {
		t.Fatalf("token with operator.creds: %d", code)
	}
	nats := binary(t, "nats")
	inbox, _, code := run(t, "", sb, "creds", "--inbox-of", agentCreds)
	if code != 0 || strings.TrimSpace(inbox) != inboxOf(t, agentCreds) {
		t.Fatalf("creds --inbox-of: %d %q", code, inbox)
	}
	agentArgs := []string{"-s", url, "--creds", agentCreds, "--inbox-prefix", strings.TrimSpace(inbox)}
	out, errOut, code = run(t, "", nats, append(agentArgs, "req", "sb.tools.sessions_history", `{"sessionKey":"main"}`, "-H", "Sessionbus-Token:"+strings.TrimSpace(tok), "--raw")...)
	if code != 0 || !strings.Contains(out, "hello auth") {
		t.Fatalf("nats req as agent: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "", nats, append(agentArgs, "stream", "get", "SB_TRANSCRIPTS", "--last-for", "sb.tr.agent.main.main")...)
	if code == 0 || strings.Contains(out, "hello auth") {
		t.Fatalf("agent read the transcript stream: %d %s %s", code, out, errOut)
	}
	// ops reads it
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", filepath.Join(credsDir, "ops.creds"), "--js-api-prefix", "sb.ops.js", "stream", "get", "SB_TRANSCRIPTS", "--last-for", "sb.tr.agent.main.main")
	if code != 0 || !strings.Contains(out, "SB_TRANSCRIPTS") || !strings.Contains(out, `"role":`) {
		t.Fatalf("ops stream get: %d %s %s", code, out, errOut)
	}
}

func inboxOf(t *testing.T, path string) string {
	t.Helper()
	inbox, err := auth.InboxOf(path)
	if err != nil {
		t.Fatal(err)
	}
	return inbox
}

// The server block `creds --server-config` prints is a nats-server config
// that trusts the files `creds ROLE` mints: a server started from it (as
// each cluster node would) lets a worker process in with its file and
// keeps an agent to its subjects.
func TestCredsForAnExternalServer(t *testing.T) {
	sb := binary(t, "sessionbus")
	keys := t.TempDir()
	conf, errOut, code := run(t, "", sb, "creds", "--data", keys, "--server-config")
	if code != 0 || !strings.Contains(conf, "resolver: MEMORY") {
		t.Fatalf("creds --server-config: %d %s %s", code, conf, errOut)
	}
	// port -1: the server picks a free port as it binds; the test reads it
	// back with ClientURL
	path := filepath.Join(t.TempDir(), "nats.conf")
	full := "include ./sessionbus-auth.conf\nlisten: 127.0.0.1:-1\njetstream { store_dir: " + strconv.Quote(t.TempDir()) + " }\n"
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "sessionbus-auth.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the generated config does not parse: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server from the generated config not ready")
	}
	t.Cleanup(ns.Shutdown)
	url := ns.ClientURL()
	dir := t.TempDir()
	for _, r := range []string{"worker", "agent"} {
		if _, errOut, code := run(t, "", sb, "creds", "--data", keys, "--out", filepath.Join(dir, r+".creds"), r); code != 0 {
			t.Fatalf("creds %s: %d %s", r, code, errOut)
		}
	}
	if _, errOut, code := run(t, "", sb, "creds", "--data", keys, "nobody"); code != 2 || !strings.Contains(errOut, "is not one of") {
		t.Fatalf("creds with an unknown role: %d %s", code, errOut)
	}
	// an adapter for one channel; --channel with another role or a bad
	// channel name is a usage error
	if out, errOut, code := run(t, "", sb, "creds", "--data", keys, "--channel", "telegram", "adapter"); code != 0 || !strings.Contains(out, "USER NKEY SEED") {
		t.Fatalf("creds --channel telegram adapter: %d %s", code, errOut)
	}
	if _, errOut, code := run(t, "", sb, "creds", "--data", keys, "--channel", "telegram", "agent"); code != 2 || !strings.Contains(errOut, "--channel is for the adapter role") {
		t.Fatalf("creds --channel with the agent role: %d %s", code, errOut)
	}
	if _, errOut, code := run(t, "", sb, "creds", "--data", keys, "--channel", "Tele gram", "adapter"); code != 2 || !strings.Contains(errOut, "--channel:") {
		t.Fatalf("creds --channel with a bad name: %d %s", code, errOut)
	}
	w := start(t, "worker", "--server", url, "--creds", filepath.Join(dir, "worker.creds"))
	w.waitLine(t, "ready ")
	tok, _, code := run(t, "", sb, "token", "--creds", filepath.Join(keys, "operator.creds"), "--as", mainKey)
	if code != 0 {
		t.Fatal("token")
	}
	nats := binary(t, "nats")
	agentArgs := []string{"-s", url, "--creds", filepath.Join(dir, "agent.creds"), "--inbox-prefix", inboxOf(t, filepath.Join(dir, "agent.creds"))}
	out, errOut, code := run(t, "", nats, append(agentArgs, "req", "sb.tools.sessions_list", `{}`, "-H", "Sessionbus-Token:"+strings.TrimSpace(tok), "--raw")...)
	if code != 0 || !strings.Contains(out, `"sessions"`) {
		t.Fatalf("agent calls a tool on the external server: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "", nats, append(agentArgs, "stream", "ls")...)
	if code == 0 && strings.Contains(out, "SB_TRANSCRIPTS") {
		t.Fatalf("agent lists streams on the external server: %s %s", out, errOut)
	}
}
