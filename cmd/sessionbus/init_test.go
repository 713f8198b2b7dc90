package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

// TestInitWritesTheExample: init DIR writes the example that serve
// --config loads with no warning, refuses to write over it, and --print
// prints the same.
func TestInitWritesTheExample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "deploy")
	var out, errb bytes.Buffer
	if code := run([]string{"init", dir}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errb.String())
	}
	path := filepath.Join(dir, "sessionbus.yaml")
	if strings.TrimSpace(out.String()) != path {
		t.Errorf("init printed %q, want the path %s", out.String(), path)
	}
	written, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(written, config.Example()) {
		t.Fatalf("init wrote %d bytes (%v), not the example", len(written), err)
	}
	// what serve --config does with it
	var logs bytes.Buffer
	if _, err := config.Load(path, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))); err != nil || logs.Len() > 0 {
		t.Fatalf("serve --config %s: %v; log: %s", path, err, logs.String())
	}

	if err := os.WriteFile(path, []byte("bus:\n  prefix: mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run([]string{"init", dir}, strings.NewReader(""), &bytes.Buffer{}, &errb); code != 1 || !strings.Contains(errb.String(), "exists: nothing written") {
		t.Errorf("init over an existing file: exit %d, stderr %q", code, errb.String())
	}
	if b, _ := os.ReadFile(path); string(b) != "bus:\n  prefix: mine\n" {
		t.Errorf("init changed an existing file: %q", b)
	}

	out.Reset()
	if code := run([]string{"init", "--print"}, strings.NewReader(""), &out, &errb); code != 0 || out.String() != string(config.Example()) {
		t.Errorf("init --print: exit %d, %d bytes", code, out.Len())
	}
	if code := run([]string{"init", "a", "b"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("init with two dirs: exit %d, want 2", code)
	}
}
