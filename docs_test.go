package sessionbus_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// Every package of the module is named in docs/architecture.md, so the
// map a newcomer reads is the whole module.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		pkg := relPath(strings.TrimSpace(line))
		if pkg == "." {
			continue
		}
		if !bytes.Contains(doc, []byte("`"+pkg+"`")) {
			t.Errorf("docs/architecture.md does not name package %s: add it to the Packages table with what it holds", pkg)
		}
	}
}
