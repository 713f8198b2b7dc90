//go:build linux

package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/gateway/runtime/confine"
)

// An exec agent without exec.user is the gateway's own user, so nothing
// but the confinement keeps it from the gateway's secrets. This agent
// tries what an attacker would: the gateway's (here, this test process's)
// /proc files, its data dir with credentials and seeds, its home, other
// processes' /proc entries and other turns' directories in /tmp. Each
// must be refused, while its normal work (stdin, stdout, its own
// credentials, a TMPDIR, /bin/sh tools, TCP to the bus on loopback) works.
func TestExecConfinedAgentCannotReachGatewaySecrets(t *testing.T) {
	if confine.ABI() == 0 {
		t.Fatal("this host's kernel has no Landlock: exec agents cannot be confined here")
	}
	data := t.TempDir()
	for name, body := range map[string]string{"operator.creds": "-----BEGIN NATS USER JWT-----", "seed.nk": "SUAGATEWAYSEED"} {
		if err := os.WriteFile(filepath.Join(data, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	confine.Protect(data)
	other, err := os.MkdirTemp("", "sessionbus-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	if err := os.WriteFile(filepath.Join(other, credsFile), []byte("another turn's creds"), 0o600); err != nil {
		t.Fatal(err)
	}
	gwHome, _ := os.UserHomeDir()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 64)
		n, _ := c.Read(b)
		got <- string(b[:n])
	}()

	dir := t.TempDir()
	script := writeScript(t, dir, "agent.sh", `
leaks=""
try() { name=$1; shift; if out=$("$@" 2>/dev/null) && [ -n "$out" ]; then leaks="$leaks $name"; fi; }
try environ cat /proc/$GW_PID/environ
try cwd readlink /proc/$GW_PID/cwd
try cwd-list ls /proc/$GW_PID/cwd/
try mem head -c 16 /proc/$GW_PID/mem
try cmdline cat /proc/$GW_PID/cmdline
try init-environ cat /proc/1/environ
try init-status cat /proc/1/status
try proc-list ls /proc
try data-list ls "$DATA"
try creds cat "$DATA/operator.creds"
try seed cat "$DATA/seed.nk"
try home ls -a "$GW_HOME"
try tmp-list ls /tmp
try other-turn cat "$OTHER/nats.creds"
kill -0 $GW_PID 2>/dev/null && leaks="$leaks signal"

in=$(cat)
case "$in" in *'"runId":"run-c"'*) ;; *) echo "no stdin" >&2; exit 1 ;; esac
grep -q "BEGIN NATS USER JWT" "$SESSIONBUS_CREDS" || { echo "own creds unreadable" >&2; exit 1; }
echo scratch > "$TMPDIR/work" && [ "$(/bin/sh -c "cat $TMPDIR/work | tr a-z A-Z")" = SCRATCH ] || { echo "no tools" >&2; exit 1; }
exec 3<>/dev/tcp/127.0.0.1/$BUS_PORT && printf hello >&3 || { echo "no tcp" >&2; exit 1; }
printf '{"reply":"leaks:%s"}' "$leaks"
`)
	rt := mustNew(t, execAgent([]any{script}, map[string]any{"env": map[string]any{
		"gw_pid": fmt.Sprint(os.Getpid()), "data": data, "gw_home": gwHome, "other": other,
		"bus_port": fmt.Sprint(ln.Addr().(*net.TCPAddr).Port),
	}}))
	res, err := rt.Run(context.Background(), Turn{RunID: "run-c", NATSUser: newRunUser(t).issue}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "leaks:" {
		t.Fatalf("the agent reached: %s", strings.TrimPrefix(res.Reply, "leaks:"))
	}
	select {
	case s := <-got:
		if s != "hello" {
			t.Fatalf("the bus listener got %q, want the agent's hello", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's TCP connection never arrived")
	}
}

// A directory given to agents that holds the gateway's secrets, or lies
// in them, is refused at start.
func TestExecPathsOverlappingSecretsRefused(t *testing.T) {
	data := t.TempDir()
	confine.Protect(filepath.Join(data, "home"))
	if err := os.Mkdir(filepath.Join(data, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"writePaths", "readPaths"} {
		for _, p := range []string{data, filepath.Join(data, "home")} {
			_, err := New(execAgent([]any{"true"}, map[string]any{k: []any{p}}))
			wantErrContains(t, err, "agents.list[ops].exec."+k+"[0]", "overlaps the gateway's secrets")
		}
	}
	_, err := New(execAgent([]any{"true"}, map[string]any{"dir": data}))
	wantErrContains(t, err, "agents.list[ops].exec: the gateway's secrets at", "exec.dir is the agent's working directory")
	_, err = New(execAgent([]any{"true"}, map[string]any{"writePaths": []any{"relative"}}))
	wantErrContains(t, err, `exec.writePaths[0]: "relative" is not an absolute path`)
}

// The gateway's start-up makes it not dumpable, so no other process of
// its user (an agent on a host without Landlock) reads its /proc files.
func TestHardenMakesProcessNotDumpable(t *testing.T) {
	if !confine.Dumpable() {
		t.Fatal("the test process starts not dumpable")
	}
	confine.Harden(slog.New(slog.DiscardHandler))
	if confine.Dumpable() {
		t.Fatal("still dumpable after Harden")
	}
	if d := confine.Describe(); !strings.Contains(d, "Landlock ABI v") || !strings.Contains(d, "gateway not dumpable") {
		t.Fatalf("Describe() = %q", d)
	}
}
