package sessionbus_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sessionbus/sessionbus/"

// storage is where the packages that hold one stream, bucket or object
// store live. They keep their own data and nothing else: a step that spans
// several of them is a workflow and lives in a package named for it, above
// them (workflows).
var storage = []string{"kv/", "streams/", "objects/"}

// workflows are the packages of the steps that span several stores, and
// stores opens them all together.
var workflows = []string{"lifecycle", "notices", "spawns", "submit", "importer", "stores"}

// storageMayImport is all a storage package imports from this module: the
// NATS plumbing (bus and what is under it) and the one compare-and-set
// loop (kv/record).
func storageMayImport(pkg string) bool {
	return pkg == "bus" || strings.HasPrefix(pkg, "bus/") || pkg == "kv/record"
}

// handlersFree are the packages that never depend on tool code: the
// gateway runs turns, config is read by every binary, lifecycle and
// openclawstore are shared by the tools, the gateway and the CLI.
var handlersFree = []string{"gateway", "config", "lifecycle", "openclawstore"}

// The module's layering, as docs/architecture.md draws it: storage below
// workflows, workflows below the tools and the gateway. go list gives every
// package's imports; the rules read them directly and transitively.
func TestPackageLayering(t *testing.T) {
	imports := listImports(t)
	for pkg, direct := range imports {
		if !underAny(pkg, storage) {
			continue
		}
		for _, imp := range direct {
			if !storageMayImport(imp) {
				t.Errorf("storage package %s imports %s: a storage package imports only bus, bus/... and kv/record; move the step that needs %s into a workflow package", pkg, imp, imp)
			}
		}
	}
	for _, pkg := range handlersFree {
		for _, dep := range deps(imports, pkg) {
			if within(dep, "handlers") {
				t.Errorf("%s depends on %s: tool code (handlers/...) is imported by no gateway, config, lifecycle or openclawstore package; move what they share out of handlers", pkg, dep)
			}
		}
	}
	for pkg := range imports {
		if !underAny(pkg, storage) {
			continue
		}
		for _, dep := range deps(imports, pkg) {
			if within(dep, "handlers") || within(dep, "gateway") || slices.ContainsFunc(workflows, func(w string) bool { return within(dep, w) }) {
				t.Errorf("storage package %s depends on %s (tools, the gateway or a workflow)", pkg, dep)
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
		if len(fields) == 0 || !strings.HasPrefix(fields[0], module) {
			continue
		}
		var own []string
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, rel)
			}
		}
		imports[strings.TrimPrefix(fields[0], module)] = own
	}
	if len(imports["gateway"]) == 0 || len(imports["kv/sessions"]) == 0 {
		t.Fatalf("go list found no gateway or kv/sessions imports; is the test run from the module root?\n%s", out)
	}
	return imports
}

// deps is every module package pkg depends on, directly or not.
func deps(imports map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, imp := range imports[p] {
			if !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(pkg)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// within reports whether pkg is dir or a package under it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

func underAny(pkg string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(pkg, d) {
			return true
		}
	}
	return false
}
