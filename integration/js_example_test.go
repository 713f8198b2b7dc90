package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJSExample runs examples/js/example.mjs with node against a real
// `sessionbus serve`: connect, discover the service, list, read a history,
// send and wait, spawn a sub-agent and receive its announce. .ci/run
// installs the example's npm packages (npm ci).
func TestJSExample(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed, so the JavaScript example cannot run (install Node.js 20+ and run `npm ci` in examples/js)")
	}
	exampleDir, err := filepath.Abs(filepath.Join("..", "examples", "js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(exampleDir, "node_modules", "@nats-io", "transport-node")); err != nil {
		// A fresh clone has no node_modules: `go test ./...` (the README's
		// set-up command) skips the example there; .ci/run installs them
		// and requires it to run.
		msg := fmt.Sprintf("examples/js has no node_modules: run `npm ci` in examples/js first (.ci/run does): %v", err)
		if os.Getenv("SESSIONBUS_JS_EXAMPLE") == "required" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "sessionbus.json5")
	// visibility agent: the example's session sends to and reads another
	// session of its agent.
	if err := os.WriteFile(cfg, []byte(`{ tools: { sessions: { visibility: "agent" } } }`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, "serve", "--data", data, "--listen", anyPort, "--config", cfg)
	url, addr := srv.ready(t)
	for key, line := range map[string]string{
		"agent:main:main":   `{"role":"user","content":"hello main"}`,
		"agent:main:helper": `{"role":"user","content":"hello helper"}` + "\n" + `{"role":"assistant","content":"helper here"}`,
	} {
		if _, errOut, code := run(t, line, sb, "import", "--server", url, "--creds", filepath.Join(data, "operator.creds"), key); code != 0 {
			t.Fatalf("import %s: %s", key, errOut)
		}
	}
	token, errOut, code := run(t, "", sb, "token", "--creds", filepath.Join(data, "operator.creds"), "--as", "agent:main:main")
	if code != 0 {
		t.Fatalf("token: %s", errOut)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "example.mjs")
	cmd.Dir = exampleDir
	cmd.Env = append(os.Environ(), "SESSIONBUS_SERVER="+url, "SESSIONBUS_CREDS="+filepath.Join(data, "creds", "admin.creds"), "SESSIONBUS_TOKEN="+strings.TrimSpace(token),
		"SESSIONBUS_AS=agent:main:main", "SESSIONBUS_SEND_TO=agent:main:helper")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node example.mjs: %v\n%s\nserve stderr: %s", err, out, srv.errText())
	}
	got := string(out)
	t.Logf("example output:\n%s", got)
	_, spawnedLine, _ := strings.Cut(got, "sessions_spawn: accepted child ")
	child, _, _ := strings.Cut(spawnedLine, "\n")
	for _, want := range []string{"announce: child " + child + " run ", "subagents: " + child + " done\n", "child reply: "} {
		if child == "" || !strings.Contains(got, want) {
			t.Errorf("example output lacks %q (the announce and state of the spawned child):\n%s", want, got)
		}
	}
	for _, want := range []string{
		"connected: " + addr,
		"service: sessionbus tools ",
		",sessions_history,sessions_list,sessions_search,sessions_send,sessions_spawn,",
		"sessions_list: 2 sessions: ",
		"agent:main:helper",
		"sessions_history: agent:main:helper has 2 messages, last: helper here",
		"agent:main:main",
		// the echoing script agent replies with the message it got
		"sessions_send: ok reply: ping from js\n",
		"sessions_spawn: accepted child agent:main:subagent:",
		"announce: child agent:main:subagent:",
		// the child ran (its reply echoes its task) and is done
		"[Subagent Task]: summarize the release notes\n",
		"\ndone\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("example output lacks %q:\n%s", want, got)
		}
	}
}
