package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestServeFreshNeedsDemo: --fresh removes sessions only for the demo; a
// serve without --demo refuses it before touching the data dir.
func TestServeFreshNeedsDemo(t *testing.T) {
	var errb bytes.Buffer
	if code := run([]string{"serve", "--fresh", "--data", t.TempDir()}, strings.NewReader(""), &bytes.Buffer{}, &errb); code != 2 || !strings.Contains(errb.String(), "--fresh goes with --demo") {
		t.Errorf("serve --fresh: exit %d, stderr %q", code, errb.String())
	}
}
