//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// upBinary is this package built once per test binary: up starts its
// children from its own executable, which a test binary is not.
var upBinary = sync.OnceValues(func() (string, error) {
	// in TestMain's home, which it removes when the tests end
	dir, err := os.MkdirTemp(os.Getenv("SESSIONBUS_HOME"), "bin")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "sessionbus")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, nil
})

// upConfig: one script agent answering "ping X" with "pong X" (anything
// else, the announce step included, with REPLY_SKIP), and no ping-pong
// turns, so a send is one turn.
const upConfig = `
tools: {sessions: {visibility: all}, agentToAgent: {enabled: true}}
session: {agentToAgent: {maxPingPongTurns: 0}}
agents:
  list:
    - id: main
      runtime: script
      script: {rules: [{match: "^ping (.*)", reply: "pong {{1}}"}, {reply: REPLY_SKIP}]}
`

// upRun is a running `sessionbus up`.
type upRun struct {
	cmd    *exec.Cmd
	data   string
	stderr upLog
	ready  chan string
	done   chan error
}

// upLog is up's stderr, kept whole, with the pids up's own lines name
// read as they come.
type upLog struct {
	mu      sync.Mutex
	b       strings.Builder
	partial string
	pids    map[string]int
}

func (l *upLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	l.partial += string(p)
	for {
		i := strings.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if m := upLine.FindStringSubmatch(l.partial[:i]); m != nil && !strings.Contains(l.partial[:i], " | ") {
			if l.pids == nil {
				l.pids = map[string]int{}
			}
			l.pids[m[2]], _ = strconv.Atoi(m[3])
		}
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *upLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pid is the process id up last said name runs as.
func (l *upLog) pid(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pids[name]
}

// exited reports whether up has exited.
func (u *upRun) exited() bool {
	select {
	case err := <-u.done:
		u.done <- err
		return true
	default:
		return false
	}
}

// upLine is up's own log line saying a process is ready (again).
var upLine = regexp.MustCompile(`msg="process (ready|restarted)" process=(\S+) pid=(\d+)`)

// freeUpBase finds a client port p such that p..p+n-1 and their routes
// (+2000) are free on loopback, as up lays them out.
func freeUpBase(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base+n+clusterRouteOffset > 65535 {
			continue
		}
		ok := true
		for i := range n {
			for _, p := range []int{base + i, base + i + clusterRouteOffset} {
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

// startUp runs up on data and waits for its ready line.
func startUp(t *testing.T, data string, base int) *upRun {
	t.Helper()
	bin, err := upBinary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(data, "sessionbus.yaml")
	if err := os.WriteFile(cfg, []byte(upConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	u := &upRun{data: data, ready: make(chan string, 1), done: make(chan error, 1)}
	u.cmd = exec.Command(bin, "up", "--nodes", "3", "--workers", "2", "--gateways", "2", "--data", data,
		"--listen", "127.0.0.1:"+strconv.Itoa(base), "--config", cfg)
	u.cmd.Env = append(os.Environ(), "SESSIONBUS_HOME="+data)
	u.cmd.Stderr = &u.stderr
	out, err := u.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				u.ready <- sc.Text()
			}
		}
		u.done <- u.cmd.Wait()
	}()
	t.Cleanup(func() {
		if !u.exited() {
			_ = u.cmd.Process.Kill() // its children get SIGTERM (Pdeathsig)
			<-u.done
		}
	})
	select {
	case <-u.ready:
	case err := <-u.done:
		u.done <- err
		t.Fatalf("up exited before it was ready: %v\n%s", err, u.stderr.String())
	case <-time.After(4 * time.Minute):
		t.Fatalf("up not ready within 4 minutes:\n%s", u.stderr.String())
	}
	return u
}

// stop interrupts up and wants exit 0 within three minutes.
func (u *upRun) stop(t *testing.T) {
	t.Helper()
	if err := u.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-u.done:
		u.done <- err
		if err != nil {
			t.Fatalf("up exited %v on SIGINT, want 0:\n%s", err, u.stderr.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("up did not exit within 3 minutes of SIGINT:\n%s", u.stderr.String())
	}
}

// upClient calls tools as agent:main:main through every node.
type upClient struct {
	nc    *nats.Conn
	names bus.Names
	tok   string
}

func newUpClient(t *testing.T, data string, base int) *upClient {
	t.Helper()
	creds := filepath.Join(data, bus.CredsFile)
	op, err := bus.LoadOperator(creds)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := op.Mint(bus.Caller{SessionKey: "agent:main:main"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for i := range 3 {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", base+i))
	}
	nc, err := connect(strings.Join(urls, ","), "up test", credsOptions(creds)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &upClient{nc: nc, names: bus.NewNames(""), tok: tok}
}

func (c *upClient) call(ctx context.Context, tool, params string) (map[string]any, error) {
	b, err := bus.Call(ctx, c.nc, c.names, c.tok, tool, []byte(params))
	if err != nil {
		return nil, err
	}
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%v: %s", err, b)
	}
	return res, nil
}

// send sends message to key with an idempotency key until the run's
// reply comes back, as a client riding out a failure would; it says how
// many tries that took, or why it gave up.
func (c *upClient) send(key, message string, within time.Duration) (int, error) {
	params := fmt.Sprintf(`{"sessionKey":%q,"message":%q,"timeoutSeconds":20,"idempotencyKey":%q}`, key, message, message)
	deadline := time.Now().Add(within)
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		res, err := c.call(ctx, "sessions_send", params)
		cancel()
		if err == nil && res["status"] == "ok" {
			if want := "pong " + strings.TrimPrefix(message, "ping "); res["reply"] != want {
				return try, fmt.Errorf("reply %v, want %q", res["reply"], want)
			}
			return try, nil
		}
		if time.Now().After(deadline) {
			return try, fmt.Errorf("not answered within %v: last %v %v", within, res, err)
		}
		if err == nil && res["status"] != "accepted" && res["status"] != "error" {
			return try, fmt.Errorf("send refused: %v", res)
		}
		time.Sleep(200 * time.Millisecond) // back off before the next try, as a client would
	}
}

// prompts counts each message's prompts in key's transcript.
func (c *upClient) prompts(t *testing.T, key string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for offset := 0; ; offset += 1000 {
		res, err := c.call(bustest.Context(t), "sessions_history", fmt.Sprintf(`{"sessionKey":%q,"limit":1000,"offset":%d}`, key, offset))
		if err != nil {
			t.Fatal(err)
		}
		msgs, _ := res["messages"].([]any)
		for _, m := range msgs {
			b, _ := json.Marshal(m)
			for _, w := range regexp.MustCompile(`ping s\d+-\d+`).FindAllString(string(b), -1) {
				out[w]++
			}
		}
		if more, _ := res["hasMore"].(bool); !more {
			return out
		}
	}
}

// TestUpRestartsWhatDies: under a steady load of idempotent sends, a
// SIGKILLed node, then gateway, then worker is brought back by up within
// 10 s while the rest keep running, every send completes once (none lost,
// none doubled), and up still stops everything on SIGINT with exit 0.
func TestUpRestartsWhatDies(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	data := t.TempDir()
	base := freeUpBase(t, 3)
	began := time.Now()
	u := startUp(t, data, base)
	t.Logf("up ready after %v", time.Since(began).Round(time.Millisecond))
	c := newUpClient(t, data, base)

	const senders = 2
	stopLoad := make(chan struct{})
	type outcome struct {
		msg   string
		tries int
		err   error
	}
	results := make(chan outcome, 10000)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond) // the load's pace, not a wait for anything
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stopLoad:
					return
				case <-tick.C:
				}
				msg := fmt.Sprintf("ping s%d-%d", s, n)
				tries, err := c.send(fmt.Sprintf("agent:main:load%d", n%4), msg, 2*time.Minute)
				results <- outcome{msg, tries, err}
			}
		}()
	}
	completed := func() int { return len(results) }
	bustest.WaitFor(t, time.Minute, "the first sends", func() bool { return completed() >= 10 })

	for _, victim := range []string{"n2", "gw1", "worker1"} {
		old := u.stderr.pid(victim)
		if old == 0 {
			t.Fatalf("up named no pid for %s:\n%s", victim, u.stderr.String())
		}
		killed := time.Now()
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		bustest.WaitFor(t, 30*time.Second, victim+" restarted", func() bool {
			return u.stderr.pid(victim) != old || u.exited()
		})
		back := time.Since(killed)
		if u.exited() {
			t.Fatalf("up exited when %s was killed, taking the deployment down:\n%s", victim, u.stderr.String())
		}
		t.Logf("%s (pid %d) SIGKILLed: back as pid %d, ready after %v", victim, old, u.stderr.pid(victim), back.Round(time.Millisecond))
		if back > 10*time.Second {
			var lines []string
			for _, l := range strings.Split(u.stderr.String(), "\n") {
				if strings.HasPrefix(l, victim+" | ") || strings.Contains(l, "process="+victim) {
					lines = append(lines, l)
				}
			}
			t.Errorf("%s was back only after %v, want within 10s:\n%s", victim, back, strings.Join(lines, "\n"))
		}
		before := completed()
		bustest.WaitFor(t, 2*time.Minute, "sends after "+victim+" came back", func() bool { return completed() >= before+10 })
		t.Logf("%d sends completed %v after the kill", completed(), time.Since(killed).Round(time.Millisecond))
	}
	close(stopLoad)
	wg.Wait()
	close(results)

	sent, retried := map[string]bool{}, 0
	for r := range results {
		if r.err != nil {
			t.Errorf("send %s: %v", r.msg, r.err)
		}
		if r.tries > 1 {
			retried++
		}
		sent[r.msg] = true
	}
	seen := map[string]int{}
	for k := range 4 {
		for m, n := range c.prompts(t, fmt.Sprintf("agent:main:load%d", k)) {
			seen[m] += n
		}
	}
	for m := range sent {
		if seen[m] != 1 {
			t.Errorf("%s is in its session %d times, want once", m, seen[m])
		}
	}
	t.Logf("%d sends, all answered; %d needed more than one try", len(sent), retried)
	if !strings.Contains(u.stderr.String(), `msg="process died: restarting it" process=worker1`) {
		t.Errorf("no death line for worker1:\n%s", u.stderr.String())
	}
	u.stop(t)
	if !strings.Contains(u.stderr.String(), `msg="every process stopped" restarts=3`) {
		t.Errorf("up's last line does not count the 3 restarts:\n%s", u.stderr.String())
	}
}

// TestUpRestartsOnOneDataDir: up starts on the data dir it ran on before,
// every time (its streams must get leaders again before the workers open
// them), and stops cleanly.
func TestUpRestartsOnOneDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("long: left out of the quick loop (go test -short)")
	}
	runs := 10
	data := t.TempDir()
	base := freeUpBase(t, 3)
	for i := range runs {
		began := time.Now()
		u := startUp(t, data, base)
		t.Logf("start %d: ready after %v", i+1, time.Since(began).Round(time.Millisecond))
		if i == 0 {
			// streams for the next starts to find
			c := newUpClient(t, data, base)
			if _, err := c.send("agent:main:one", "ping s0-0", time.Minute); err != nil {
				t.Fatal(err)
			}
			c.nc.Close()
		}
		u.stop(t)
	}
}
