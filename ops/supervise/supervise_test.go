//go:build unix

package supervise

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes this test binary act as a child: see TestMain.
const helperEnv = "SUPERVISE_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is a child: "good" prints ready and exits 0 on SIGTERM, after
// starting a grandchild that never exits on its own (its pid goes to
// $PIDFILE); "stubborn" ignores SIGTERM; "crash" exits 3 after ready.
func helper(mode string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	if mode == "good" {
		gc := exec.Command("sleep", "600")
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = os.WriteFile(os.Getenv("PIDFILE"), []byte(strconv.Itoa(gc.Process.Pid)), 0o600)
	}
	fmt.Fprintln(os.Stderr, "starting up")
	fmt.Println("ready", mode)
	if mode == "crash" {
		return 3
	}
	for range sigs {
		if mode != "stubborn" {
			fmt.Fprintln(os.Stderr, "stopping")
			return 0
		}
	}
	return 0
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func proc(t *testing.T, name, mode string, env ...string) Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Proc{Name: name, Path: exe, Env: append(env, helperEnv+"="+mode), Ready: "ready"}
}

// alive reports whether pid still exists (a zombie counts as gone: its
// parent, the child, has not reaped it only because it is gone too).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// TestGroupStartsInOrderAndStopsEverything: children start one by one,
// their lines come out whole with their name, Stop ends them last first
// and reports clean exits as no error; a grandchild in a child's process
// group does not outlive it.
func TestGroupStartsInOrderAndStopsEverything(t *testing.T) {
	var logs syncBuf
	g := New(&logs, 30*time.Second)
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	ctx := context.Background()
	for _, p := range []Proc{proc(t, "a", "good", "PIDFILE="+pidFile), proc(t, "b", "good", "PIDFILE="+pidFile+".b")} {
		if err := g.Start(ctx, p, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(string(b))
	if err := g.Stop(); err != nil {
		t.Errorf("stop: %v\n%s", err, logs.String())
	}
	out := logs.String()
	for _, want := range []string{"a | starting up\n", "a | ready good\n", "b | ready good\n", "a | stopping\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "b | stopping") > strings.Index(out, "a | stopping") {
		t.Errorf("a stopped before b, the one started after it:\n%s", out)
	}
	// SIGKILL is sent by the time Stop returns; the kernel ends the
	// process soon after
	deadline := time.Now().Add(30 * time.Second)
	for alive(grandchild) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
			t.Fatalf("grandchild %d outlived its parent's stop", grandchild)
		}
		time.Sleep(10 * time.Millisecond) // polling the kernel's process table: no event to wait on
	}
}

// TestGroupReportsCrashAndKillsStubborn: a child that exits on its own is
// reported on Exited; one that ignores SIGTERM is killed after the grace
// and Stop says so; a child that exits before its ready line fails Start.
func TestGroupReportsCrashAndKillsStubborn(t *testing.T) {
	var logs syncBuf
	g := New(&logs, 2*time.Second)
	ctx := context.Background()
	if err := g.Start(ctx, proc(t, "stubborn", "stubborn"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx, proc(t, "crash", "crash"), time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-g.Exited():
		if name != "crash" {
			t.Errorf("exited: %s", name)
		}
	case <-time.After(time.Minute):
		t.Fatal("the crash was not reported")
	}
	err := g.Stop()
	if err == nil || !strings.Contains(err.Error(), "stubborn did not stop within 2s: killed") || !strings.Contains(err.Error(), "crash: exited with status 3") {
		t.Errorf("stop: %v", err)
	}
	bad := proc(t, "early", "crash")
	bad.Ready = "never printed"
	g2 := New(&logs, time.Second)
	if err := g2.Start(ctx, bad, time.Minute); err == nil || !strings.Contains(err.Error(), "early exited before it was ready") {
		t.Errorf("start of a child that exits first: %v", err)
	}
	_ = g2.Stop()
}
