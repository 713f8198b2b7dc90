package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// ExampleFile is the name `sessionbus init` writes, one Load finds in the
// working directory.
const ExampleFile = "sessionbus.yaml"

// ExampleKey is one key of the example configuration.
type ExampleKey struct {
	// Key is dotted, as docs/config.md writes it; a list is "name[]".
	Key string
	// Default is the default as docs/config.md writes it (`""` for an
	// empty string, `[]`, `{}`, `false`, `0`); empty for a section.
	Default string
	// Set: written as a setting with its default (the loader's own
	// default), not commented out.
	Set bool
	// Section: an optional block with no default (session.sendPolicy,
	// agents.list[]), written commented out with every key it takes.
	Section bool
}

// exampleValues are what a commented section shows where a zero value
// would teach nothing.
var exampleValues = map[string]string{
	"agents.list[].id":      "main",
	"agents.list[].name":    "main agent",
	"agents.list[].runtime": "script",
}

// Example is the commented example configuration `sessionbus init`
// writes: every key the loader reads, in the order of the Config struct,
// with its default. It is generated from the Config struct and the
// loader's defaults, the sources Load itself uses, so it cannot name a key
// Load does not read or a default it does not apply.
func Example() []byte {
	b := newExampleBuilder()
	lines := b.structLines(reflect.TypeFor[Config](), "", 0, "")
	var out strings.Builder
	out.WriteString(exampleHeader)
	// a commented block keeps its "# " in one column, at the depth of its
	// first line, so removing the "# " of each line leaves valid YAML
	base, prevCommented := 0, false
	for _, l := range lines {
		if !l.commented {
			fmt.Fprintf(&out, "%s%s\n", strings.Repeat("  ", l.depth), l.text)
			prevCommented = false
			continue
		}
		if !prevCommented || l.depth <= base {
			base = l.depth
		}
		fmt.Fprintf(&out, "%s# %s%s\n", strings.Repeat("  ", base), strings.Repeat("  ", l.depth-base), l.text)
		prevCommented = true
	}
	return []byte(out.String())
}

const exampleHeader = `# sessionbus configuration: every key with its default.
#
# What each key does and the values it takes: docs/config.md (its table
# lists every key below). serve, worker, gateway and audit read this file
# with --config FILE, or as ./sessionbus.yaml when given none; a
# SESSIONBUS_<KEY> environment variable overrides a key
# (SESSIONBUS_TOOLS_SESSIONS_VISIBILITY=agent).
#
# Keys keep OpenClaw's names. A commented-out key has no default (unset):
# remove the "# " to set it. Keys left at their default may be deleted.

`

// ExampleKeys lists the keys Example writes, in its order; members are
// the keys inside its sections (agents.list[].tools.profile), which
// docs/config.md may name on their own rows.
func ExampleKeys() (keys []ExampleKey, members []string) {
	b := newExampleBuilder()
	b.structLines(reflect.TypeFor[Config](), "", 0, "")
	return b.keys, b.members
}

type exampleLine struct {
	depth     int
	text      string
	commented bool
}

type exampleBuilder struct {
	keys    []ExampleKey
	members []string
}

func newExampleBuilder() *exampleBuilder { return &exampleBuilder{} }

// structLines writes the fields of struct t, at depth, under the dotted
// path; section is the optional block they belong to ("" outside one),
// whose lines are all commented out.
func (b *exampleBuilder) structLines(t reflect.Type, path string, depth int, section string) []exampleLine {
	var lines []exampleLine
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "-" || name == "" {
			// filled by the loader from the raw map (agents.defaults.models)
			name = lowerFirst(f.Name)
		}
		key := join(path, name)
		ft := f.Type
		elem := ft
		if ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			elem = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			sub := b.structLines(ft, key, depth+1, section)
			lines = append(lines, exampleLine{depth, name + ":", allCommented(sub)})
			lines = append(lines, sub...)
		case elem.Kind() == reflect.Struct:
			lines = append(lines, b.sectionLines(ft, elem, key, name, depth, section)...)
		default:
			lines = append(lines, b.leafLine(ft, key, name, depth, section))
		}
	}
	return lines
}

// sectionLines writes an optional block: a pointer to a struct, or a list
// of them (one example item). Outside a section it starts one.
func (b *exampleBuilder) sectionLines(ft, elem reflect.Type, key, name string, depth int, section string) []exampleLine {
	list := ft.Kind() == reflect.Slice
	if list {
		key += "[]"
	}
	if section == "" {
		section = key
		b.keys = append(b.keys, ExampleKey{Key: key, Section: true})
	} else {
		b.members = append(b.members, key)
	}
	lines := []exampleLine{{depth, name + ":", true}}
	if !list {
		return append(lines, b.structLines(elem, key, depth+1, section)...)
	}
	item := b.structLines(elem, key, depth+2, section)
	if len(item) > 0 {
		item[0].depth, item[0].text = depth+1, "- "+item[0].text
	}
	return append(lines, item...)
}

// leafLine writes one key: its default, or, with none, commented out.
func (b *exampleBuilder) leafLine(ft reflect.Type, key, name string, depth int, section string) exampleLine {
	if section != "" {
		b.members = append(b.members, key)
		v, ok := exampleValues[key]
		if !ok {
			v = zeroValue(ft)
		} else {
			v = yamlScalar(v)
		}
		return exampleLine{depth, name + ": " + v, true}
	}
	if d, ok := defaults[key]; ok {
		doc, yml := formatDefault(d)
		b.keys = append(b.keys, ExampleKey{Key: key, Default: doc, Set: true})
		return exampleLine{depth, name + ": " + yml, false}
	}
	z := zeroValue(ft)
	b.keys = append(b.keys, ExampleKey{Key: key, Default: z})
	return exampleLine{depth, name + ": " + z, true}
}

func allCommented(lines []exampleLine) bool {
	return !slices.ContainsFunc(lines, func(l exampleLine) bool { return !l.commented })
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func lowerFirst(s string) string {
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

// zeroValue is what an unset key amounts to, as YAML (and as
// docs/config.md writes it).
func zeroValue(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return `""`
	case reflect.Bool:
		return "false"
	case reflect.Slice:
		return "[]"
	case reflect.Map:
		return "{}"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if t.String() == "time.Duration" {
			return "0s"
		}
		return "0"
	}
	return "null"
}

// formatDefault is a loader default as docs/config.md writes it and as
// YAML.
func formatDefault(v any) (doc, yml string) {
	switch d := v.(type) {
	case string:
		if d == "" {
			return `""`, `""`
		}
		return d, yamlScalar(d)
	case []string:
		if len(d) == 0 {
			return "[]", "[]"
		}
		q := make([]string, len(d))
		for i, s := range d {
			q[i] = yamlScalar(s)
		}
		return "[" + strings.Join(d, ", ") + "]", "[" + strings.Join(q, ", ") + "]"
	}
	// numbers, bools and durations read back as written
	s := fmt.Sprint(v)
	return s, s
}

// plainScalar is a string YAML can read unquoted, unless it is a number
// (numberLike) or a reserved word.
var (
	plainScalar = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./-]*$`)
	numberLike  = regexp.MustCompile(`^([0-9_.]+([eE][-+]?[0-9]+)?|0[xXoObB][0-9a-fA-F_]+)$`)
)

// yamlScalar writes s plain when YAML reads it back as that string (168h,
// per-sender), else quoted: a word YAML 1.1 reads as a bool or null (off,
// yes), a number, or anything with spaces or punctuation.
func yamlScalar(s string) string {
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return strconv.Quote(s)
	}
	if plainScalar.MatchString(s) && !numberLike.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}
