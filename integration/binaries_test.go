package integration

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
)

var (
	binDir  string
	binOnce = map[string]*sync.Once{"sessionbus": {}, "nats": {}}
	binErr  = map[string]error{}
	binMu   sync.Mutex
)

func TestMain(m *testing.M) {
	if os.Getenv(execAgentEnv) == "1" {
		os.Exit(execAgentMain())
	}
	if os.Getenv(leakAgentEnv) == "1" {
		os.Exit(leakAgentMain())
	}
	// The quick loop (go test -short ./...) leaves out this package whole:
	// every test here builds the binaries or starts processes and clusters.
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration: skipped under -short (run go test ./integration/)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "sessionbus-integration-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := bustest.CheckLeaks(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// binary builds a command once per test run: our own CLI, or the stock nats
// CLI (a go.mod tool dependency, so a fresh machine needs only Go).
func binary(t *testing.T, name string) string {
	t.Helper()
	pkg := map[string]string{
		"sessionbus": "github.com/sessionbus/sessionbus/cmd/sessionbus",
		"nats":       "github.com/nats-io/natscli/nats",
	}[name]
	out := filepath.Join(binDir, name)
	binOnce[name].Do(func() {
		// the first build takes a minute on two cores: say so in -v
		t.Logf("building %s", pkg)
		began := time.Now()
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			binMu.Lock()
			binErr[name] = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
			binMu.Unlock()
			return
		}
		t.Logf("built %s in %v", name, time.Since(began).Round(time.Millisecond))
	})
	binMu.Lock()
	err := binErr[name]
	binMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// proc is a running sessionbus subprocess.
type proc struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *strings.Builder
	errw   *syncWriter // stderr's writer, when the process runs while it is read
	done   chan error
}

// errText is what the process wrote on stderr so far, read under its
// writer's lock while the process may still write.
func (p *proc) errText() string {
	if p.errw == nil {
		return p.stderr.String()
	}
	p.errw.mu.Lock()
	defer p.errw.mu.Unlock()
	return p.stderr.String()
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t, "sessionbus"), args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdout: bufio.NewReader(out), stderr: &strings.Builder{}, done: make(chan error, 1)}
	p.errw = &syncWriter{w: p.stderr} // errText reads under its lock
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

// waitLine reads stdout until a line starting with prefix, or fails.
func (p *proc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	l, _ := p.collect(t, prefix)
	return l
}

// anyPort is the --listen of a test server: the kernel picks the port as
// the server binds it, so no other process can take it between a test
// choosing a port and the server binding it (as it could with a port found
// free and closed beforehand). The test learns the address from the
// server's ready line: see ready and boundURL.
const anyPort = "127.0.0.1:0"

// ready waits for serve's "ready <URL>" line and returns the URL it bound
// and that URL's host:port.
func (p *proc) ready(t *testing.T) (string, string) {
	t.Helper()
	return boundURL(t, p.waitLine(t, "ready "), "nats")
}

// boundURL checks a ready line names one scheme://127.0.0.1:PORT URL on a
// real port (not the 0 asked for) and returns the URL and its host:port.
func boundURL(t *testing.T, line, scheme string) (string, string) {
	t.Helper()
	raw, ok := strings.CutPrefix(line, "ready ")
	u, err := url.Parse(raw)
	if !ok || err != nil || u.Scheme != scheme || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" || u.Path != "" || raw != scheme+"://"+u.Host {
		t.Fatalf("ready line = %q, want ready %s://127.0.0.1:PORT", line, scheme)
	}
	return raw, u.Host
}

// readyIn finds serve's ready line in output read with collect and returns
// the URL and host:port it names.
func readyIn(t *testing.T, out string) (string, string) {
	t.Helper()
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "ready ") {
			return boundURL(t, strings.TrimSpace(l), "nats")
		}
	}
	t.Fatalf("no ready line in:\n%s", out)
	return "", ""
}

// collect reads stdout until a line starting with prefix and returns that
// line and everything read before it; the rest of stdout is drained.
func (p *proc) collect(t *testing.T, prefix string) (string, string) {
	t.Helper()
	var seen strings.Builder
	lines := make(chan string, 1)
	errs := make(chan error, 1)
	go func() {
		for {
			l, err := p.stdout.ReadString('\n')
			if strings.HasPrefix(l, prefix) {
				lines <- strings.TrimSpace(l)
				go func() { _, _ = io.Copy(io.Discard, p.stdout) }()
				return
			}
			seen.WriteString(l) // read only after the lines send, which orders it
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	select {
	case l := <-lines:
		return l, seen.String()
	case err := <-errs:
		t.Fatalf("process ended before %q: %v; stderr: %s", prefix, err, p.errText())
	case <-time.After(60 * time.Second):
		t.Fatalf("no %q line within 60s; stderr: %s", prefix, p.errText())
	}
	return "", ""
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// run executes a command to completion with a deadline.
func run(t *testing.T, stdin string, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return o.String(), e.String(), code
}
