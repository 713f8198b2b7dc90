package handlers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/client/schema"
)

// The published schemas (package schema) are derived from Go types of
// their own, so clients need not import the handlers. These tests tie
// those types to what the handlers really read and return.

// TestSchemaResultsMatchHandlers compares, field by field and recursively,
// the JSON names and optionality of each handler's result types with the
// schema package's: a field added, renamed or made optional on one side
// only fails here.
func TestSchemaResultsMatchHandlers(t *testing.T) {
	pairs := []struct{ handler, schema reflect.Type }{
		{reflect.TypeFor[listResult](), reflect.TypeFor[schema.SessionsListResult]()},
		{reflect.TypeFor[historyResult](), reflect.TypeFor[schema.SessionsHistoryResult]()},
		{reflect.TypeFor[sendResult](), reflect.TypeFor[schema.SessionsSendResult]()},
		{reflect.TypeFor[statusResult](), reflect.TypeFor[schema.SessionStatusResult]()},
		{reflect.TypeFor[yieldResult](), reflect.TypeFor[schema.SessionsYieldResult]()},
		{reflect.TypeFor[subagentsListResult](), reflect.TypeFor[schema.SubagentsListResult]()},
		{reflect.TypeFor[killResult](), reflect.TypeFor[schema.SubagentsKillResult]()},
		{reflect.TypeFor[steerResult](), reflect.TypeFor[schema.SubagentsSteerResult]()},
		{reflect.TypeFor[spawnResult](), reflect.TypeFor[schema.SessionsSpawnResult]()},
		{reflect.TypeFor[agentsListResult](), reflect.TypeFor[schema.AgentsListResult]()},
		{reflect.TypeFor[failure](), reflect.TypeFor[schema.Failure]()},
	}
	for _, p := range pairs {
		compareFields(t, p.handler.Name(), p.handler, p.schema)
	}
}

type jsonField struct {
	optional bool
	typ      reflect.Type
}

// jsonFields lists a struct's JSON fields, embedded structs flattened as
// encoding/json flattens them.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			maps.Copy(out, jsonFields(f.Type))
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{optional: strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero"), typ: f.Type}
	}
	return out
}

func structOf(t reflect.Type) (reflect.Type, bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t, t.Kind() == reflect.Struct
}

func compareFields(t *testing.T, path string, h, s reflect.Type) {
	t.Helper()
	hf, sf := jsonFields(h), jsonFields(s)
	for _, name := range slices.Sorted(maps.Keys(hf)) {
		x, ok := sf[name]
		if !ok {
			t.Errorf("%s.%s: the handler returns it, schema.%s does not have it", path, name, s.Name())
			continue
		}
		if x.optional != hf[name].optional {
			t.Errorf("%s.%s: optional (omitempty) %v in the handler, %v in schema.%s", path, name, hf[name].optional, x.optional, s.Name())
		}
		hs, hok := structOf(hf[name].typ)
		ss, sok := structOf(x.typ)
		if hok && sok {
			compareFields(t, path+"."+name, hs, ss)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sf)) {
		if _, ok := hf[name]; !ok {
			t.Errorf("%s.%s: schema.%s has it, the handler never returns it", path, name, s.Name())
		}
	}
}

// refusedParams are names a handler reads only to refuse them (docs/tools.md):
// they are not parameters, so no schema offers them.
var refusedParams = map[string][]string{
	"sessions_list":  {"relationship", "activeOnly"},
	"sessions_spawn": spawnRejectedKeys,
}

// TestSchemaParamsMatchHandlers reads the handlers' source: from each
// tool's function it follows the calls into this package's functions and
// collects every parameter name read from the rules.Params (p.String("x"),
// helper(p, "x"), p["x"], and the names of tables ranged over for reads).
// That set, less the refused names, must equal the schema's properties.
func TestSchemaParamsMatchHandlers(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	// Names read in a loop over a table (p.String(f.name)): the tables.
	tables := map[string][]string{"exactFilters": nil}
	for _, f := range exactFilters {
		tables["exactFilters"] = append(tables["exactFilters"], f.name)
	}
	entry := map[string]string{
		"sessions_list": "sessionsList", "sessions_history": "sessionsHistory", "sessions_send": "sessionsSend",
		"session_status": "sessionStatus", "sessions_yield": "sessionsYield", "subagents": "subagentsTool",
		"sessions_spawn": "sessionsSpawn", "agents_list": "agentsList", "sessions_search": "sessionsSearch",
	}
	if got, want := slices.Sorted(maps.Keys(entry)), slices.Sorted(slices.Values(schema.Names())); !slices.Equal(got, want) {
		t.Fatalf("tools with an entry point %v, schema tools %v", got, want)
	}
	for tool, fn := range entry {
		read := map[string]bool{}
		seen := map[string]bool{}
		var walk func(name string)
		walk = func(name string) {
			fd := funcs[name]
			if fd == nil || seen[name] {
				return
			}
			seen[name] = true
			pname := paramsArg(fd)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok {
						if pname != "" && len(n.Args) >= 2 && isIdent(n.Args[0], pname) {
							if s, ok := stringLit(n.Args[1]); ok {
								read[s] = true
							}
						}
						walk(id.Name)
					}
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && pname != "" && isIdent(sel.X, pname) && len(n.Args) > 0 {
						if s, ok := stringLit(n.Args[0]); ok {
							read[s] = true
						}
					}
				case *ast.IndexExpr:
					if pname != "" && isIdent(n.X, pname) {
						if s, ok := stringLit(n.Index); ok {
							read[s] = true
						}
					}
				case *ast.RangeStmt:
					if id, ok := n.X.(*ast.Ident); ok {
						for _, name := range tables[id.Name] {
							read[name] = true
						}
					}
				}
				return true
			})
		}
		walk(fn)
		for _, r := range refusedParams[tool] {
			delete(read, r)
		}
		// snake_case spellings a handler reads itself are aliases, not
		// parameters of their own
		for name := range read {
			if strings.Contains(name, "_") {
				delete(read, name)
			}
		}
		st, _ := schema.Lookup(tool)
		props := slices.Sorted(maps.Keys(st.Params.Properties))
		got := slices.Sorted(maps.Keys(read))
		if !slices.Equal(got, props) {
			t.Errorf("%s: the handler reads %v; the schema has %v", tool, got, props)
		}
	}
}

// paramsArg is the name of fd's rules.Params parameter, if it has one.
func paramsArg(fd *ast.FuncDecl) string {
	for _, f := range fd.Type.Params.List {
		if sel, ok := f.Type.(*ast.SelectorExpr); ok && isIdent(sel.X, "rules") && sel.Sel.Name == "Params" && len(f.Names) == 1 {
			return f.Names[0].Name
		}
	}
	return ""
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}
