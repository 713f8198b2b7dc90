package wiregen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// member is one name of a stored object and the statement that decodes
// its value into the field (decodePlain's case).
type member struct {
	JSON string
	Bit  int
	Code string
}

// nested is a struct an entry field points to, decoded by a decodePlain
// of its own.
type nested struct {
	Name    string
	Members []member
}

// scalars are the types plainDecoder reads itself, by its method's name.
var scalars = map[string]string{"string": "str", "bool": "bool", "int": "int", "int64": "int64", "uint64": "uint64"}

// plainName is a json name encoding/json uses as it is written.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// decoders plans decodePlain: entryJSON's fields in wire, each decoded
// into Entry (e) or the RareFields being built (r) as stored says.
// Scalars and pointers to them are read directly, and so are pointers to
// structs of entry.go made of scalars; the rest (a type with an
// UnmarshalJSON of its own, a slice) goes to the full decoder.
func decoders(fset *token.FileSet, f *ast.File, dir string, wire []field, stored []stored) ([]member, []nested, error) {
	custom, err := unmarshalers(dir)
	if err != nil {
		return nil, nil, err
	}
	rare := map[string]bool{}
	for _, s := range stored {
		rare[s.Name] = s.Rare
	}
	var nest []nested
	plainStruct := func(name string) (bool, error) {
		if custom[name] {
			return false, nil
		}
		fields, err := structFields(fset, f, name)
		if err != nil {
			return false, nil // declared elsewhere: the full decoder's
		}
		for _, fl := range fields {
			if _, ok := scalars[fl.Type]; !ok || fl.Unstored {
				return false, nil
			}
		}
		for _, n := range nest {
			if n.Name == name {
				return true, nil
			}
		}
		ms, err := members(fields, "o", nil, func(string) (bool, error) { return false, nil })
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		nest = append(nest, nested{Name: name, Members: ms})
		return true, nil
	}
	ms, err := members(wire, "e", rare, plainStruct)
	return ms, nest, err
}

// members writes the case of each stored field of a struct decoded into
// the variable recv (rare fields into r).
func members(fields []field, recv string, rare map[string]bool, plainStruct func(string) (bool, error)) ([]member, error) {
	var out []member
	folded := map[string]string{}
	for _, fl := range fields {
		if fl.Unstored {
			continue
		}
		if !plainName.MatchString(fl.JSONName) {
			return nil, fmt.Errorf("field %s: json name %q is not plain letters and digits", fl.Name, fl.JSONName)
		}
		if fl.Options != "" && fl.Options != "omitempty" {
			return nil, fmt.Errorf("field %s: json option %q not supported", fl.Name, fl.Options)
		}
		if other, ok := folded[strings.ToLower(fl.JSONName)]; ok {
			return nil, fmt.Errorf("fields %s and %s have names equal but for case", other, fl.Name)
		}
		folded[strings.ToLower(fl.JSONName)] = fl.Name
		dst := recv + "." + fl.Name
		if rare[fl.Name] {
			dst = "r." + fl.Name
		}
		var code string
		elem, ptr := strings.CutPrefix(fl.Type, "*")
		read, scalar := scalars[elem]
		switch {
		case scalar && !ptr:
			code = fmt.Sprintf("%s = d.%s()", dst, read)
		case scalar:
			code = fmt.Sprintf("v := d.%s()\n%s = &v", read, dst)
		default:
			ok := false
			if ptr {
				var err error
				if ok, err = plainStruct(elem); err != nil {
					return nil, err
				}
			}
			if ok {
				code = fmt.Sprintf("v := new(%s)\nv.decodePlain(&d)\n%s = v", elem, dst)
				if recv != "e" {
					code = strings.Replace(code, "(&d)", "(d)", 1)
				}
			} else {
				code = fmt.Sprintf("var v %s\nd.full(&v)\n%s = v", fl.Type, dst)
			}
		}
		if rare[fl.Name] {
			code += "\nrare = true"
		}
		out = append(out, member{JSON: fl.JSONName, Bit: len(out), Code: code})
	}
	return out, nil
}

// unmarshalers lists the types of the package in dir that decode
// themselves (a method UnmarshalJSON, UnmarshalJSONFrom or UnmarshalText).
func unmarshalers(dir string) (map[string]bool, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			switch fd.Name.Name {
			case "UnmarshalJSON", "UnmarshalJSONFrom", "UnmarshalText":
			default:
				continue
			}
			t := fd.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if id, ok := t.(*ast.Ident); ok {
				out[id.Name] = true
			}
		}
	}
	return out, nil
}
