package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// A wrong command line or config exits 2 before anything is audited, and
// help lists the command.
func TestAuditUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, args := range [][]string{
		{"audit", "extra"},
		{"audit", "--no-such-flag"},
		{"audit", "--config", missing, "--server", "nats://127.0.0.1:1"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != 2 || stdout.Len() != 0 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	var stdout bytes.Buffer
	if code := run([]string{"help"}, strings.NewReader(""), &stdout, &stdout); code != 0 || !strings.Contains(stdout.String(), "\n  audit ") {
		t.Fatalf("help: %d %s", code, stdout.String())
	}
}
