package demo

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
)

// stubFromDocs is the Python stub of docs/runtimes.md, as the page shows it.
func stubFromDocs(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/runtimes.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "### Any OpenAI-compatible server\n")
	if !ok {
		t.Fatal("docs/runtimes.md has no section ### Any OpenAI-compatible server")
	}
	_, code, ok := strings.Cut(sec, "```python\n")
	if !ok {
		t.Fatal("the section has no python block")
	}
	code, _, _ = strings.Cut(code, "```")
	return code
}

// The stub docs/runtimes.md gives runs as written: it streams the last
// user message back a word at a time, ending with [DONE], and answers a
// request that does not stream with the whole message.
func TestRuntimesDocStub(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the stub of docs/runtimes.md is not run")
	}
	file := filepath.Join(t.TempDir(), "stub.py")
	if err := os.WriteFile(file, []byte(stubFromDocs(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, py, file, strconv.Itoa(port))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/v1/chat/completions"
	// the stub is up once it takes connections
	bustest.WaitFor(t, 30*time.Second, "the stub to listen", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	post := func(body string) *http.Response {
		res, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("the stub: %v", err)
		}
		return res
	}
	res := post(`{"model":"stub","stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}]}`)
	defer res.Body.Close()
	var deltas []string
	done := false
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if d == "[DONE]" {
				done = true
			} else if strings.Contains(d, `"content"`) {
				deltas = append(deltas, d)
			}
		}
	}
	if !done || len(deltas) != 4 || !strings.Contains(deltas[3], `" there"`) {
		t.Fatalf("streamed: done %t, %d content chunks %q", done, len(deltas), deltas)
	}
	whole := post(`{"model":"stub","messages":[{"role":"user","content":"hi"}]}`)
	defer whole.Body.Close()
	b := make([]byte, 4096)
	n, _ := whole.Body.Read(b)
	if !strings.Contains(string(b[:n]), `"content": "You said: hi"`) {
		t.Fatalf("whole answer: %s", b[:n])
	}
}
