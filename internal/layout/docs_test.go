package layout

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// maxPerformanceLines bounds docs/performance.md: the current figures, how
// to reproduce them and where the time goes, not a log of every run (the
// history of the file keeps those).
const maxPerformanceLines = 300

func TestPerformanceDocStaysShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n >= maxPerformanceLines {
		t.Errorf("docs/performance.md has %d lines, the limit is under %d: keep the current figures and move old runs to the file's history", n, maxPerformanceLines)
	}
}
