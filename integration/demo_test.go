package integration

import (
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoRun runs serve --demo on data until it prints how to start over,
// stops it with SIGINT and returns what it printed.
func demoRun(t *testing.T, data string, extra ...string) string {
	t.Helper()
	args := append([]string{"serve", "--demo", "--data", data, "--listen", anyPort}, extra...)
	p := start(t, args...)
	last, out := p.collect(t, "== to start")
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("serve --demo exit after SIGINT: %v; stderr %s", err, p.errText())
		}
		p.done <- nil // for the cleanup
	case <-time.After(60 * time.Second):
		t.Fatal("serve --demo did not exit after SIGINT")
	}
	return out + last + "\n"
}

// demoShape is what must not change between two demo runs on one data
// dir: the sub-agent count of the summary, the tree's children, the
// sections in order and the number of lines.
type demoShape struct {
	summary  string
	tree     []string
	sections []string
	lines    int
}

var (
	summaryLine = regexp.MustCompile(`(?m)^Summary: \d+ sub-agents so far\.$`)
	treeLine    = regexp.MustCompile(`(?m)^\d+\. (\S+) \(model `)
	sectionLine = regexp.MustCompile(`(?m)^== ([^:(\n]+)`)
)

func shapeOf(t *testing.T, out string) demoShape {
	t.Helper()
	s := demoShape{summary: summaryLine.FindString(out), lines: strings.Count(out, "\n")}
	for _, m := range treeLine.FindAllStringSubmatch(out, -1) {
		s.tree = append(s.tree, m[1])
	}
	for _, m := range sectionLine.FindAllStringSubmatch(out, -1) {
		s.sections = append(s.sections, strings.TrimSpace(m[1]))
	}
	return s
}

// TestServeDemoTwice: serve --demo run twice on one data dir, stopped with
// SIGINT between, shows the same scenario: the same number of sub-agents
// and the same tree, not one that grows by three children a run. It says
// it started over, and how to.
func TestServeDemoTwice(t *testing.T) {
	data := t.TempDir()
	first := demoRun(t, data)
	t.Log("first serve --demo done")
	second := demoRun(t, data)
	t.Log("second serve --demo done")
	a, b := shapeOf(t, first), shapeOf(t, second)
	if a.summary != "Summary: 3 sub-agents so far." || b.summary != a.summary {
		t.Errorf("summaries: first %q, second %q; want 3 sub-agents both times", a.summary, b.summary)
	}
	// the children are listed newest first, and siblings end within the
	// same milliseconds: compare them as sets
	sortedA, sortedB := strings.Join(slices.Sorted(slices.Values(a.tree)), " "), strings.Join(slices.Sorted(slices.Values(b.tree)), " ")
	if len(a.tree) != 6 || sortedA != sortedB {
		t.Errorf("trees (the list and the summary): first %v, second %v", a.tree, b.tree)
	}
	if strings.Join(a.sections, "|") != strings.Join(b.sections, "|") || a.lines != b.lines {
		t.Errorf("the second run differs in shape: %d lines, sections %q; first %d lines, %q", b.lines, b.sections, a.lines, a.sections)
	}
	for _, c := range []struct{ out, want string }{
		{first, "is the demo's own data dir: each serve --demo on it starts over"},
		{first, "demo: imported 6 sample sessions"},
		{second, "demo: started over: the previous demo's sessions in " + data + " were removed"},
		{second, "demo: imported 6 sample sessions"},
		{second, "== to start over: Ctrl-C, then "},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("demo output lacks %q", c.want)
		}
	}
	if t.Failed() {
		t.Logf("first run:\n%s\nsecond run:\n%s", first, second)
	}
}
