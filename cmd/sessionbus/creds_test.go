package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A secrets dir others may read is refused with the chmod that fixes it;
// an owner-only one passes.
func TestCheckPrivateDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX mode bits")
	}
	dir := filepath.Join(t.TempDir(), "creds")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := checkPrivateDir(dir); err != nil {
		t.Fatalf("0700: %v", err)
	}
	for _, mode := range []os.FileMode{0o750, 0o705, 0o755} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		err := checkPrivateDir(dir)
		if err == nil || !strings.Contains(err.Error(), "chmod 700 "+dir) {
			t.Fatalf("%04o: %v, want a refusal naming chmod 700", mode, err)
		}
	}
}
