// Package configtest loads test configurations through the real loader, so
// tests see what viper really hands over (nested keys folded to lower
// case, JSON numbers as float64).
package configtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

// Load writes text to a file named name (sessionbus.yaml or
// sessionbus.json) in dir, or in a fresh temp dir when dir is "", loads
// it, and returns the config and the file's path; a config that does not
// load fails the test.
func Load(t testing.TB, dir, name, text string) (*config.Config, string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("config.Load %s: %v", name, err)
	}
	return cfg, path
}
