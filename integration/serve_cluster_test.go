package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clusterBasePort finds a port p with p..p+2 and p+2000..p+2002 free, as
// `serve --cluster 3 --listen 127.0.0.1:p` needs (below the ephemeral
// range, so no outgoing connection takes one meanwhile).
func clusterBasePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(8000)
		free := true
		for _, q := range []int{p, p + 1, p + 2, p + 2000, p + 2001, p + 2002} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return p
		}
	}
	t.Fatal("no free port range for a 3-node cluster")
	return 0
}

// TestServeCluster runs the commands of docs/ops.md's Cluster section:
// `serve --cluster 3`, an import through one node, a history call through
// another, the stock nats CLI showing an R3 stream, a leader step-down,
// and a history call again.
func TestServeCluster(t *testing.T) {
	sb, nats := binary(t, "sessionbus"), binary(t, "nats")
	data := t.TempDir()
	p := clusterBasePort(t)
	srv := start(t, "serve", "--cluster", "3", "--data", data, "--listen", fmt.Sprintf("127.0.0.1:%d", p), "--log-level", "warn")
	urls := []string{fmt.Sprintf("nats://127.0.0.1:%d", p), fmt.Sprintf("nats://127.0.0.1:%d", p+1), fmt.Sprintf("nats://127.0.0.1:%d", p+2)}
	if ready := srv.waitLine(t, "ready "); ready != "ready "+strings.Join(urls, ",") {
		t.Fatalf("ready line = %q", ready)
	}
	creds := filepath.Join(data, "operator.creds")
	// every node requires credentials, as a single serve does
	for _, u := range urls {
		if _, errOut, code := run(t, "", nats, "-s", u, "stream", "ls"); code == 0 || !strings.Contains(errOut, "Authorization Violation") {
			t.Fatalf("anonymous nats stream ls on %s: %d %s", u, code, errOut)
		}
	}

	out, errOut, code := run(t, `{"role":"user","content":"hello cluster"}`, sb, "import", "--server", urls[1], "--creds", creds, "agent:main:main")
	if code != 0 || !strings.Contains(out, `"imported": 1`) {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	history := func() {
		t.Helper()
		out, errOut, code := run(t, "", sb, "call", "--server", urls[2], "--creds", creds, "sessions_history", `{"sessionKey":"main"}`)
		if code != 0 || !strings.Contains(out, "hello cluster") {
			t.Fatalf("history: %d %s %s", code, out, errOut)
		}
	}
	history()

	out, errOut, code = run(t, "", nats, "-s", urls[0], "--creds", filepath.Join(data, "creds", "ops.creds"), "--js-api-prefix", "sb.ops.js", "stream", "info", "SB_TRANSCRIPTS", "--json")
	var info struct {
		Config struct {
			Replicas int `json:"num_replicas"`
		}
		Cluster struct {
			Leader   string
			Replicas []struct{ Name string }
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Config.Replicas != 3 || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream info: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "", nats, "-s", urls[0], "--creds", filepath.Join(data, "creds", "ops.creds"), "--js-api-prefix", "sb.ops.js", "stream", "info", "KV_sessions", "--json")
	if code != 0 || !strings.Contains(out, `"num_replicas": 3`) {
		t.Fatalf("sessions bucket stream info: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "", nats, "-s", urls[0], "--creds", filepath.Join(data, "creds", "admin.creds"), "stream", "cluster", "step-down", "SB_TRANSCRIPTS", "--force")
	if code != 0 {
		t.Fatalf("step-down: %d %s %s", code, out, errOut)
	}
	history()

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.done:
		srv.done <- err
		if err != nil {
			t.Fatalf("serve --cluster exit: %v: %s", err, srv.errText())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve --cluster did not stop within 60s of SIGTERM")
	}
}
