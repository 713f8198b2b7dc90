package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionbus/sessionbus/bus/bustest"
)

// TestMCPCommand drives the real `sessionbus mcp` with the MCP SDK's own
// client, on stdio (the host starts the command) and on streamable HTTP,
// against `serve --demo`, whose scripted agent answers a sessions_send.
func TestMCPCommand(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	srv := start(t, "serve", "--demo", "--data", data, "--listen", anyPort)
	_, out := srv.collect(t, "  nats") // the demo scenario has run
	url, _ := readyIn(t, out)
	creds := filepath.Join(data, "operator.creds")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	check := func(t *testing.T, cs *mcp.ClientSession) {
		t.Helper()
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tools.Tools) != 8 {
			t.Errorf("%d tools offered to the main session, want 8", len(tools.Tools))
		}
		call := func(tool string, args map[string]any) map[string]any {
			t.Helper()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil || res.IsError {
				t.Fatalf("%s: %v %+v", tool, err, res)
			}
			var out map[string]any
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || json.Unmarshal([]byte(tc.Text), &out) != nil {
				t.Fatalf("%s: content %+v", tool, res.Content)
			}
			return out
		}
		list := call("sessions_list", map[string]any{"label": "release-team"})
		if list["count"] != float64(1) {
			t.Errorf("sessions_list: %v", list)
		}
		hist := call("sessions_history", map[string]any{"sessionKey": "agent:main:discord:group:release-team", "limit": 1})
		if msgs, _ := hist["messages"].([]any); len(msgs) != 1 {
			t.Errorf("sessions_history: %v", hist)
		}
		sent := call("sessions_send", map[string]any{"sessionKey": "agent:main:discord:group:release-team", "message": "When does v2 ship?", "timeoutSeconds": 60})
		if sent["status"] != "ok" || sent["reply"] != "v2 ships Friday." {
			t.Errorf("sessions_send: %v", sent)
		}
	}

	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(sb, "mcp", "--server", url, "--creds", creds, "--as", "agent:main:main")
		cl := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
		cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		check(t, cs)
	})

	t.Run("http", func(t *testing.T) {
		// the listener takes a port as it binds; the URL is in the log line
		p := startBin(t, sb, "mcp", "--server", url, "--creds", creds, "--as", "agent:main:main", "--http", anyPort)
		waitStderr(t, p, "mcp ready")
		m := regexp.MustCompile(`msg="mcp ready" url=(http://127\.0\.0\.1:[1-9][0-9]*/)\n`).FindStringSubmatch(p.Stderr.(*syncWriter).String())
		if m == nil {
			t.Fatalf("no bound URL in the mcp ready line: %s", p.Stderr.(*syncWriter).String())
		}
		cl := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
		cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: m[1]}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		check(t, cs)
	})

	t.Run("refusals", func(t *testing.T) {
		_, errOut, code := run(t, "", sb, "mcp", "--server", url, "--creds", creds, "--as", "agent:main:main", "--http", "0.0.0.0:1")
		if code != 2 || !strings.Contains(errOut, "not a loopback address") {
			t.Errorf("--http 0.0.0.0: code %d, %s", code, errOut)
		}
		_, errOut, code = run(t, "", sb, "mcp", "--server", url)
		if code != 2 || !strings.Contains(errOut, "--as SESSIONKEY") {
			t.Errorf("no --as: code %d, %s", code, errOut)
		}
	})
}

// startBin starts a long-running sessionbus command; its stderr is kept
// for waiting on a log line.
func startBin(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &syncWriter{w: &strings.Builder{}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	return cmd
}

// waitStderr waits until the command's stderr has line.
func waitStderr(t *testing.T, cmd *exec.Cmd, line string) {
	t.Helper()
	w := cmd.Stderr.(*syncWriter)
	bustest.WaitFor(t, 60*time.Second, line+" on the stderr of "+strings.Join(cmd.Args, " "), func() bool {
		return strings.Contains(w.String(), line)
	})
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
