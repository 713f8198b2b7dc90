package sessionbus_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sessionbus/sessionbus/"

// layer is one row of the layering table in docs/architecture.md: the
// folders whose packages are in it and the layers they may import.
type layer struct {
	name    string
	folders []string
	may     []string // layer names, "itself" for imports within the layer
	row     int
}

var tableRow = regexp.MustCompile(`^\|\s*([a-z ]+?)\s*\|\s*(.+?)\s*\|\s*(.*?)\s*\|$`)

// readLayers parses the table that follows the line "<!-- layers -->" in
// docs/architecture.md: the one place the allowed imports are written, read
// by this test and by people.
func readLayers(t *testing.T) []layer {
	t.Helper()
	f, err := os.Open(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []layer
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "<!-- layers -->" {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(out) > 0 {
				break
			}
			continue
		}
		m := tableRow.FindStringSubmatch(line)
		if m == nil || m[1] == "layer" || strings.HasPrefix(m[2], "-") {
			continue
		}
		l := layer{name: m[1], row: len(out)}
		for _, f := range strings.Split(m[2], ",") {
			l.folders = append(l.folders, strings.Trim(strings.TrimSpace(f), "`"))
		}
		for _, n := range strings.Split(m[3], ",") {
			if n = strings.TrimSpace(n); n != "" && n != "nothing" {
				l.may = append(l.may, n)
			}
		}
		out = append(out, l)
	}
	if len(out) < 5 {
		t.Fatalf("docs/architecture.md has no layering table after <!-- layers --> (found %d rows)", len(out))
	}
	return out
}

// isKit reports whether pkg is a test kit: a folder named *test
// (bustest, handlerstest, ...), imported only by tests and other kits.
func isKit(pkg string) bool {
	return strings.HasSuffix(filepath.Base(pkg), "test") && pkg != "integration"
}

// layerOf is the row whose folder is the longest prefix of pkg.
func layerOf(layers []layer, pkg string) *layer {
	var best *layer
	bestLen := -1
	for i := range layers {
		for _, f := range layers[i].folders {
			if within(pkg, f) && len(f) > bestLen {
				best, bestLen = &layers[i], len(f)
			}
		}
	}
	return best
}

// The module's layering, as the table in docs/architecture.md states it:
// every package is in a layer, every import goes to a layer its row names,
// rows name only layers above them in the table (so no import points up),
// and no production package imports a test kit.
func TestPackageLayering(t *testing.T) {
	layers := readLayers(t)
	byName := map[string]*layer{}
	for i := range layers {
		byName[layers[i].name] = &layers[i]
	}
	for _, l := range layers {
		for _, n := range l.may {
			if n == "itself" || n == "anything" {
				continue
			}
			to := byName[n]
			if to == nil {
				t.Errorf("docs/architecture.md: layer %q may import %q, which is no layer of the table", l.name, n)
			} else if to.row >= l.row {
				t.Errorf("docs/architecture.md: layer %q may import %q, which stands below it in the table: the table lists layers bottom up, and an import points only to a layer above its row", l.name, n)
			}
		}
	}
	imports := listImports(t)
	for pkg, direct := range imports {
		if isKit(pkg) {
			continue // a test kit is test code: it may import any layer
		}
		from := layerOf(layers, pkg)
		if from == nil {
			t.Errorf("package %s is in no layer: add its folder to the layering table in docs/architecture.md", pkg)
			continue
		}
		for _, imp := range direct {
			if isKit(imp) && !isKit(pkg) && !slices.Contains(from.may, "anything") {
				t.Errorf("%s imports the test kit %s: production code links no test kit; move what it needs out of the kit, beside its real owner", pkg, imp)
				continue
			}
			to := layerOf(layers, imp)
			if to == nil || slices.Contains(from.may, "anything") {
				continue
			}
			if to == from {
				if !slices.Contains(from.may, "itself") {
					t.Errorf("%s imports %s, both in layer %q, whose packages do not import each other: move the step that needs both up a layer (see docs/architecture.md)", pkg, imp, from.name)
				}
				continue
			}
			if !slices.Contains(from.may, to.name) {
				t.Errorf("%s (layer %q) imports %s (layer %q), which its row does not allow: move the code %s needs down into a layer %q may import (%s), or move %s up",
					pkg, from.name, imp, to.name, pkg, from.name, strings.Join(from.may, ", "), pkg)
			}
		}
	}
}

// Client-side packages never link nats-server: a worker, a gateway or any
// program built on these layers talks to a server over a connection. Only
// bus/embedded, the operations layer, the binaries and the test kits link it.
func TestClientPackagesDoNotLinkTheServer(t *testing.T) {
	layers := readLayers(t)
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	servers := []string{"operations", "binaries", "tests"}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := relPath(fields[0])
		l := layerOf(layers, pkg)
		if l == nil || slices.Contains(servers, l.name) || isKit(pkg) || within(pkg, "bus/embedded") {
			continue
		}
		for _, dep := range fields[1:] {
			if strings.Contains(dep, "nats-server") {
				t.Errorf("%s (layer %q) depends on %s: only bus/embedded, the operations layer and the binaries link the server", pkg, l.name, dep)
				break
			}
		}
	}
}

// listImports returns the direct imports, within this module, of every
// package of the module (without tests), by path relative to the module.
func listImports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0]+"/", module) {
			continue
		}
		var own []string
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, rel)
			}
		}
		imports[relPath(fields[0])] = own
	}
	if len(imports["gateway"]) == 0 || len(imports["kv/sessions"]) == 0 {
		t.Fatalf("go list found no gateway or kv/sessions imports; is the test run from the module root?\n%s", out)
	}
	return imports
}

// relPath is an import path of the module relative to its root, "." for
// the root package (this test's).
func relPath(importPath string) string {
	if importPath+"/" == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module)
}

// within reports whether pkg is dir or a package under it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
