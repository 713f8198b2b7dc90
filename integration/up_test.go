package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freeBase finds a client port p such that p..p+n-1 and their routes
// (+2000) are free on loopback, as up lays them out.
func freeBase(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base+n+2000 > 65535 {
			continue
		}
		ok := true
		for i := range n {
			for _, p := range []int{base + i, base + i + 2000} {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
				if err != nil {
					ok = false
					break
				}
				l.Close()
			}
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// processesOf lists the running processes (pid: command line) whose
// command line holds mark, from /proc.
func processesOf(t *testing.T, mark string) map[int]string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc to list processes with:", err)
	}
	out := map[int]string{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), mark) {
			continue
		}
		if st, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "stat")); strings.Contains(string(st), ") Z ") {
			continue // a zombie is gone, only not reaped yet
		}
		out[pid] = strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
	}
	return out
}

// TestUpLoopbackDeployment runs `sessionbus up --nodes 3 --workers 2
// --gateways 2 --console ADDR` from an empty folder: it comes up with
// eight processes, sessions_list answers through each node's client port
// (and with no flags at all, through the client config), the console
// serves its page, and on SIGINT up stops them all, exits 0 and leaves no
// process behind.
func TestUpLoopbackDeployment(t *testing.T) {
	homeDir, work := t.TempDir(), t.TempDir()
	env := homeEnv(t, homeDir)
	base := freeBase(t, 3)
	consoleAddr := "127.0.0.1:" + strconv.Itoa(freeBase(t, 1))
	p := startIn(t, work, env, "up", "--nodes", "3", "--workers", "2", "--gateways", "2", "--listen", "127.0.0.1:"+strconv.Itoa(base), "--console", consoleAddr)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(p.stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				ready <- sc.Text()
			}
		}
	}()
	var line string
	select {
	case line = <-ready:
	case err := <-p.done:
		t.Fatalf("up exited before it was ready: %v\n%s", err, p.errText())
	case <-time.After(5 * time.Minute):
		t.Fatalf("up not ready within 5 minutes:\n%s", p.errText())
	}
	t.Logf("up: %s", line)

	procs := processesOf(t, homeDir)
	if len(procs) != 9 {
		t.Errorf("%d processes run with the data dir, want 9 (3 nodes, 2 workers, 2 gateways, an indexer, the console): %v", len(procs), procs)
	}
	if resp, err := http.Get("http://" + consoleAddr + "/"); err != nil {
		t.Errorf("console page: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") {
			t.Errorf("console page: %s\n%.200s", resp.Status, body)
		}
	}
	for _, prefix := range []string{"n1 | ", "n3 | ", "worker2 | ", "gw2 | ", "indexer1 | ", "console | "} {
		if !strings.Contains(p.errText(), "\n"+prefix) && !strings.HasPrefix(p.errText(), prefix) {
			t.Errorf("no line prefixed %q on up's stderr", prefix)
		}
	}
	for i := range 3 {
		url := fmt.Sprintf("nats://127.0.0.1:%d", base+i)
		out, errOut, code := runIn(t, work, env, "call", "--server", url, "sessions_list", "{}")
		if code != 0 || !strings.Contains(out, `"sessions"`) {
			t.Errorf("sessions_list through %s: exit %d\n%s%s", url, code, out, errOut)
		}
	}
	if out, errOut, code := runIn(t, t.TempDir(), env, "call", "sessions_list", "{}"); code != 0 || !strings.Contains(out, `"sessions"`) {
		t.Errorf("sessions_list with no flags: exit %d\n%s%s", code, out, errOut)
	}
	// up's indexer answers the transcript search
	out, errOut, code := runIn(t, work, env, "search", "--creds", filepath.Join(homeDir, "operator.creds"), "--json", "anything at all")
	if code != 0 || !strings.Contains(out, `"state": "ready"`) {
		t.Errorf("search through up's indexer: exit %d\n%s%s", code, out, errOut)
	}

	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup's wait
		if err != nil {
			var code any = err
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			t.Errorf("up exited %v on SIGINT, want 0:\n%s", code, p.errText())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("up did not exit within 3 minutes of SIGINT:\n%s", p.errText())
	}
	if left := processesOf(t, homeDir); len(left) != 0 {
		for pid := range left {
			_ = exec.Command("kill", "-9", strconv.Itoa(pid)).Run()
		}
		t.Errorf("processes left behind after up exited: %v", left)
	}
}
