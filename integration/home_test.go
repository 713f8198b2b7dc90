package integration

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// homeEnv is the environment of a user whose sessionbus home is homeDir:
// no SESSIONBUS_* or NATS_* variable of the test's own, and a HOME of its
// own, so nothing reaches the real user's state dir.
func homeEnv(t *testing.T, homeDir string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SESSIONBUS_") && !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "SESSIONBUS_HOME="+homeDir, "HOME="+t.TempDir())
}

// startIn starts the sessionbus binary in dir with env; the test's cleanup
// kills it if it still runs.
func startIn(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t, "sessionbus"), args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdout: bufio.NewReader(out), stderr: &strings.Builder{}, done: make(chan error, 1)}
	p.errw = &syncWriter{w: p.stderr}
	cmd.Stderr = p.errw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// runIn runs the sessionbus binary to completion in dir with env.
func runIn(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t, "sessionbus"), args...)
	cmd.Dir, cmd.Env = dir, env
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sessionbus %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}

// TestHomeFromAnyFolder: serve started in one empty folder with
// SESSIONBUS_HOME set keeps its state there (nothing in the folder), and
// `call sessions_list '{}'` from another empty folder, with no flags,
// finds the server's URL (a random port) and the credentials through the
// client config serve wrote.
func TestHomeFromAnyFolder(t *testing.T) {
	homeDir, work, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	env := homeEnv(t, homeDir)
	p := startIn(t, work, env, "serve", "--listen", anyPort)
	p.ready(t)

	out, errOut, code := runIn(t, elsewhere, env, "call", "sessions_list", "{}")
	if code != 0 || !strings.Contains(out, `"sessions"`) {
		t.Fatalf("call with no flags from another folder: exit %d\n%s%s\nserve: %s", code, out, errOut, p.errText())
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("serve wrote into its working directory: %v", entries)
	}
	for _, f := range []string{"client.json", "operator.creds", "creds/ops.creds"} {
		if _, err := os.Stat(filepath.Join(homeDir, f)); err != nil {
			t.Errorf("the home lacks %s: %v", f, err)
		}
	}
	out, _, code = runIn(t, elsewhere, env, "home", "--role", "ops")
	if want := filepath.Join(homeDir, "creds", "ops.creds"); code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("home --role ops: exit %d %q, want %s", code, out, want)
	}

	// flags and the environment still win over the client config
	_, errOut, code = runIn(t, elsewhere, append(env, "SESSIONBUS_SERVER=nats://127.0.0.1:1"), "call", "sessions_list", "{}")
	if code == 0 || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("SESSIONBUS_SERVER did not take precedence: exit %d %s", code, errOut)
	}

	// a data dir of an older version in the working directory is still
	// used, with a note
	if err := os.Mkdir(filepath.Join(elsewhere, "sessionbus-data"), 0o700); err != nil {
		t.Fatal(err)
	}
	noHome := []string{}
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SESSIONBUS_HOME=") {
			noHome = append(noHome, kv)
		}
	}
	out, errOut, code = runIn(t, elsewhere, noHome, "home")
	if code != 0 || strings.TrimSpace(out) != "./sessionbus-data" || !strings.Contains(errOut, "found in this folder") {
		t.Errorf("home with ./sessionbus-data here: exit %d %q %q", code, out, errOut)
	}
}
