package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubagentMaxConcurrent: OpenClaw's default 8; below 1 is taken as 1
// with a warning; a per-agent value is ignored with a warning.
func TestSubagentMaxConcurrent(t *testing.T) {
	if n := Default().Agents.Defaults.Subagents.MaxConcurrent; n != 8 {
		t.Fatalf("default maxConcurrent %d, want 8", n)
	}
	path := filepath.Join(t.TempDir(), "sessionbus.yaml")
	yaml := "agents:\n  defaults:\n    subagents:\n      maxConcurrent: 0\n  list:\n    - id: main\n      subagents:\n        maxConcurrent: 3\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	warnings := &records{}
	c, err := Load(path, slog.New(warnings))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Agents.Defaults.Subagents.MaxConcurrent; n != 1 {
		t.Fatalf("maxConcurrent 0 loaded as %d, want 1", n)
	}
	all := strings.Join(warnings.msgs, "\n")
	if !strings.Contains(all, "below 1") || !strings.Contains(all, "per-agent value ignored") {
		t.Fatalf("warnings %q", warnings.msgs)
	}
}
