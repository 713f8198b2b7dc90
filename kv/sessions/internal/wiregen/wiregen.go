// Package wiregen writes kv/sessions/entry_wire.go: the copies between
// sessions.Entry (with its RareFields) and entryJSON, the entry's stored
// form, and the decoder of that form's plain JSON straight into an Entry,
// made from their declarations in entry.go, so each field is declared once
// per form and never copied or matched by hand.
package wiregen

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

// Generate reads entry.go at path and returns entry_wire.go. It fails
// unless every field of entryJSON is in exactly one of Entry and
// RareFields, with the same type, and every other field of those two is
// stored too or, in Entry, tagged json:"-".
func Generate(path string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	var decls [3][]field
	for i, name := range [...]string{"Entry", "RareFields", "entryJSON"} {
		if decls[i], err = structFields(fset, f, name); err != nil {
			return nil, err
		}
	}
	p, err := match(decls[0], decls[1], decls[2])
	if err != nil {
		return nil, err
	}
	if p.Decode, p.Nested, err = decoders(fset, f, filepath.Dir(path), decls[2], p.Stored); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := wireTemplate.Execute(&b, p); err != nil {
		return nil, err
	}
	return format.Source(b.Bytes())
}

// field is one field of a struct declaration: its name, its type as
// written, whether its json tag is "-", and the tag's name and options.
type field struct {
	Name, Type string
	Unstored   bool
	JSONName   string
	Options    string
}

// structFields lists the fields of the struct type name declared in f.
func structFields(fset *token.FileSet, f *ast.File, name string) ([]field, error) {
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, s := range gd.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok || ts.Name.Name != name {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return nil, fmt.Errorf("%s is not a struct", name)
			}
			var out []field
			for _, fl := range st.Fields.List {
				var typ bytes.Buffer
				if err := format.Node(&typ, fset, fl.Type); err != nil {
					return nil, err
				}
				var tag string
				if fl.Tag != nil {
					t, _ := strconv.Unquote(fl.Tag.Value)
					tag = reflect.StructTag(t).Get("json")
				}
				jname, opts, _ := strings.Cut(tag, ",")
				if len(fl.Names) == 0 {
					return nil, fmt.Errorf("%s embeds %s: not supported", name, typ.String())
				}
				for _, id := range fl.Names {
					n := jname
					if n == "" {
						n = id.Name
					}
					out = append(out, field{Name: id.Name, Type: typ.String(), Unstored: tag == "-", JSONName: n, Options: opts})
				}
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("no type %s", name)
}

// plan is what the template writes: the stored fields in entryJSON's
// order, each with where it lives in memory.
type plan struct {
	Stored []stored
	Decode []member // entryJSON's members, for decodePlain
	Nested []nested // the structs its members point to, decoded alike
	Rare   string   // Entry's *RareFields field
	Kept   []string // Entry's other unstored fields, kept over a decode
	Unset  string   // the condition that no field of RareFields r is set
}

type stored struct {
	Name string
	Rare bool // a field of RareFields, not of Entry
}

func match(entry, rare, wire []field) (plan, error) {
	var p plan
	var unset []string
	inEntry, inRare := map[string]string{}, map[string]string{}
	for _, fl := range entry {
		switch {
		case fl.Type == "*RareFields":
			p.Rare = fl.Name
		case fl.Unstored:
			p.Kept = append(p.Kept, fl.Name)
		default:
			inEntry[fl.Name] = fl.Type
		}
	}
	if p.Rare == "" {
		return p, errors.New("no *RareFields field in Entry")
	}
	for _, fl := range rare {
		inRare[fl.Name] = fl.Type
	}
	for _, fl := range wire {
		et, ine := inEntry[fl.Name]
		rt, inr := inRare[fl.Name]
		delete(inEntry, fl.Name)
		delete(inRare, fl.Name)
		switch {
		case ine && inr:
			return p, fmt.Errorf("entryJSON.%s is in both Entry and RareFields", fl.Name)
		case ine && et == fl.Type:
			p.Stored = append(p.Stored, stored{Name: fl.Name})
		case inr && rt == fl.Type:
			z, err := zeroTest("r."+fl.Name, fl.Type)
			if err != nil {
				return p, err
			}
			p.Stored = append(p.Stored, stored{Name: fl.Name, Rare: true})
			unset = append(unset, z)
		default:
			return p, fmt.Errorf("entryJSON.%s (%s) has no field of that type in Entry or RareFields", fl.Name, fl.Type)
		}
	}
	if left := slices.Sorted(mapKeys(inEntry, inRare)); len(left) > 0 {
		return p, fmt.Errorf("not in entryJSON (add them there, or tag an Entry field json:\"-\"): %s", strings.Join(left, ", "))
	}
	p.Unset = strings.Join(unset, " &&\n")
	return p, nil
}

func mapKeys(ms ...map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, m := range ms {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		}
	}
}

// zeroTest is the condition that field x of type typ holds its zero value.
func zeroTest(x, typ string) (string, error) {
	switch {
	case typ == "string":
		return x + ` == ""`, nil
	case typ == "bool":
		return "!" + x, nil
	case typ == "int" || typ == "int64" || typ == "uint64":
		return x + " == 0", nil
	case strings.HasPrefix(typ, "*") || strings.HasPrefix(typ, "[]"):
		return x + " == nil", nil
	}
	return "", fmt.Errorf("no zero test for type %s", typ)
}

var wireTemplate = template.Must(template.New("").Funcs(template.FuncMap{
	"words": func(ms []member) int { return (len(ms) + 63) / 64 },
}).Parse(`// Code generated by wiregen from entry.go; DO NOT EDIT.
// Run go generate ./kv/sessions/ after changing Entry, RareFields or entryJSON.

package sessions

// wire is e in its stored form.
func (e *Entry) wire() entryJSON {
	r := e.Rares()
	return entryJSON{
{{- range .Stored}}
		{{.Name}}: {{if .Rare}}r{{else}}e{{end}}.{{.Name}},
{{- end}}
	}
}

// fromWire sets e to w, keeping the fields that are not stored.
func (e *Entry) fromWire(w *entryJSON) {
	*e = Entry{
{{- range .Stored}}{{if not .Rare}}
		{{.Name}}: w.{{.Name}},
{{- end}}{{end}}
		{{.Rare}}: RareFields{
{{- range .Stored}}{{if .Rare}}
			{{.Name}}: w.{{.Name}},
{{- end}}{{end}}
		}.orNil(),
{{- range .Kept}}
		{{.}}: e.{{.}},
{{- end}}
	}
}

// orNil is r, or nil when r sets no field.
func (r RareFields) orNil() *RareFields {
	if {{.Unset}} {
		return nil
	}
	return &r
}

// decodePlain decodes data into e, the zero Entry, when data is in the
// form plainDecoder reads; false otherwise, with e partly written. in (may
// be nil) gives the strings it holds.
func (e *Entry) decodePlain(data []byte, in *interner) bool {
	d := plainDecoder{data: data, in: in}
	var seen [{{words .Decode}}]uint64
	var r RareFields
	rare := false
	for more := d.open(); more; more = d.next() {
		switch string(d.key()) {
{{- range .Decode}}
		case {{printf "%q" .JSON}}:
			d.once(seen[:], {{.Bit}})
			{{.Code}}
{{- end}}
		default:
			d.fail()
		}
	}
	if !d.done() {
		return false
	}
	if rare {
		e.Rare = r.orNil()
	}
	return true
}
{{range .Nested}}
// decodePlain decodes the next value into o, the zero {{.Name}}.
func (o *{{.Name}}) decodePlain(d *plainDecoder) {
	var seen [{{words .Members}}]uint64
	for more := d.open(); more; more = d.next() {
		switch string(d.key()) {
{{- range .Members}}
		case {{printf "%q" .JSON}}:
			d.once(seen[:], {{.Bit}})
			{{.Code}}
{{- end}}
		default:
			d.fail()
		}
	}
}
{{end}}`))
