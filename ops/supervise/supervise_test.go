//go:build unix

package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

	"github.com/sessionbus/sessionbus/bus/bustest"
)

// helperEnv makes this test binary act as a child: see TestMain.
const helperEnv = "SUPERVISE_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(bustest.CheckLeaks(m.Run()))
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

// TestGroupGivesUpOnACrashLoopAndKillsStubborn: a child that dies right
// after every start is restarted with a growing backoff until it died
// Burst times within Window, then Supervise gives up naming it; one that
// ignores SIGTERM is killed after the grace and Stop says so; a child that
// exits before its ready line fails Start.
func TestGroupGivesUpOnACrashLoopAndKillsStubborn(t *testing.T) {
	var logs syncBuf
	g := New(&logs, 2*time.Second)
	ctx := context.Background()
	if err := g.Start(ctx, proc(t, "stubborn", "stubborn"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx, proc(t, "crash", "crash"), time.Minute); err != nil {
		t.Fatal(err)
	}
	var slogs syncBuf
	p := Policy{Burst: 3, Window: time.Minute, Backoff: 10 * time.Millisecond, MaxBackoff: time.Second, StartWithin: time.Minute,
		Log: slog.New(slog.NewTextHandler(&slogs, nil))}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := g.Supervise(sctx, p)
	var gave *GaveUpError
	if !errors.As(err, &gave) || gave.Name != "crash" || gave.Deaths != 3 || !strings.Contains(err.Error(), "crash died 3 times within 1m0s (last: exited with status 3)") {
		t.Fatalf("supervise: %v, want a give-up on crash after 3 deaths", err)
	}
	if r := g.Restarts(); r["crash"] != 2 || r["stubborn"] != 0 {
		t.Errorf("restarts %v, want crash 2, stubborn 0", r)
	}
	if n := strings.Count(slogs.String(), `msg="process died: restarting it" process=crash`); n != 2 {
		t.Errorf("%d restart lines, want 2:\n%s", n, slogs.String())
	}
	if !strings.Contains(slogs.String(), `msg="process died too often: giving up" process=crash`) {
		t.Errorf("no give-up line:\n%s", slogs.String())
	}
	err = g.Stop()
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

// TestGroupRestartsAKilledChild: a SIGKILLed child comes back in its place
// (ready again, counted, both logged) while the others keep running, and
// Stop afterwards still stops everything, the new one included, cleanly.
func TestGroupRestartsAKilledChild(t *testing.T) {
	var logs, slogs syncBuf
	g := New(&logs, 30*time.Second)
	ctx := context.Background()
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		if err := g.Start(ctx, proc(t, n, "good", "PIDFILE="+filepath.Join(dir, n)), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	pids := func() []int {
		g.mu.Lock()
		defer g.mu.Unlock()
		var out []int
		for _, c := range g.procs {
			out = append(out, c.cmd.Process.Pid)
		}
		return out
	}
	before := pids()
	p := DefaultPolicy
	p.Log = slog.New(slog.NewTextHandler(&slogs, nil))
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Supervise(sctx, p) }()
	if err := syscall.Kill(before[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	bustest.WaitFor(t, time.Minute, "b restarted", func() bool { return g.Restarts()["b"] == 1 })
	after := pids()
	if after[0] != before[0] || after[2] != before[2] || after[1] == before[1] {
		t.Errorf("pids %v after killing b, were %v: only b's should change", after, before)
	}
	for _, want := range []string{`msg="process died: restarting it" process=b exit="exited with signal: killed"`, `msg="process restarted" process=b`, "restarts=1"} {
		if !strings.Contains(slogs.String(), want) {
			t.Errorf("supervisor log lacks %q:\n%s", want, slogs.String())
		}
	}
	if n := strings.Count(logs.String(), "b | ready good\n"); n != 2 {
		t.Errorf("b was ready %d times, want 2:\n%s", n, logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("supervise after its context ended: %v", err)
	}
	if err := g.Stop(); err != nil {
		t.Errorf("stop: %v\n%s", err, logs.String())
	}
	for _, pid := range after {
		if alive(pid) {
			t.Errorf("pid %d outlived Stop", pid)
		}
	}
}
