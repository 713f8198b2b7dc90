package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/ops/search"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// An indexer process SIGKILLed while it loads the stream resumes from
// its file: every entry is indexed exactly once.
func TestIndexerSIGKILLResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("long: builds the binary (go test -short)")
	}
	bin, err := upBinary()
	if err != nil {
		t.Fatal(err)
	}
	srv := bustest.Server(t)
	nc, js := bustest.Connect(t, srv)
	ctx := bustest.Context(t)
	names := bus.NewNames("")
	tr, err := transcripts.Open(ctx, nc, js, names)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const sessionsN, per = 100, 400
	for s := range sessionsN {
		batch := make([][]byte, per)
		for i := range batch {
			batch[i], _ = json.Marshal(map[string]any{"role": "user", "content": fmt.Sprintf("entry s%dx%d of the load", s, i)})
		}
		if _, err := tr.Append(ctx, bus.EncodeKey(fmt.Sprintf("agent:main:k%d", s)), batch...); err != nil {
			t.Fatal(err)
		}
	}
	index := filepath.Join(t.TempDir(), "index.db")
	creds := bustest.RoleCreds(t, srv.Deployment(), auth.RoleWorker)
	start := func() (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(bin, "indexer", "--server", srv.URL(), "--creds", creds, "--index", index, "--log-level", "warn")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "ready") {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("indexer: %q %v\n%s", line, err, stderr.String())
		}
		return cmd, &stderr
	}
	applied := func() uint64 {
		ix, err := search.OpenIndex(index)
		if err != nil {
			return 0
		}
		defer ix.Close()
		a, _ := ix.Applied()
		return a
	}
	cmd, _ := start()
	var at uint64
	bustest.WaitFor(t, 30*time.Second, "the indexer's first commit", func() bool { at = applied(); return at > 0 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Logf("SIGKILLed at stream sequence %d of %d", at, sessionsN*per)

	cmd, stderr := start()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("indexer exit: %v\n%s", err, stderr.String())
		}
	}()
	var res *search.Result
	bustest.WaitFor(t, 60*time.Second, "the restarted indexer caught up", func() bool {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res, err = search.Ask(c, nc, names, &search.Query{Status: true})
		return err == nil && res.Index.State == search.StateReady && res.Index.Applied == sessionsN*per
	})
	for _, probe := range []string{"s0x0", "s57x233", fmt.Sprintf("s%dx%d", sessionsN-1, per-1)} {
		res, err := search.Ask(ctx, nc, names, &search.Query{Text: probe})
		if err != nil || len(res.Results) != 1 {
			t.Fatalf("%s: %+v %v, want exactly one hit", probe, res, err)
		}
	}
	ix, err := search.OpenIndex(index)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if n, err := ix.Count(ctx); err != nil || n != sessionsN*per {
		t.Fatalf("%d entries in the index (%v), want %d: lost or doubled across the kill", n, err, sessionsN*per)
	}
}
