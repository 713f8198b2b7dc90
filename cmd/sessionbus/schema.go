package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sessionbus/sessionbus/client/schema"
)

// schemaDoc is one tool as `sessionbus schema` prints it.
type schemaDoc struct {
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Parameters  *jsonschema.Schema `json:"parameters"`
	Result      *jsonschema.Schema `json:"result"`
}

// cmdSchema prints the tools' schemas from this build (no server needed):
// every tool, or the one named, with its parameters and result; --openai
// prints the OpenAI function-calling form instead (what the schema subject
// answers, there filtered by the caller's tool policy).
func cmdSchema(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("schema", stderr)
	openai := fs.Bool("openai", false, "print OpenAI function-calling tools (parameters only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}
	want := fs.Arg(0)
	if want != "" {
		if _, ok := schema.Lookup(want); !ok {
			fmt.Fprintf(stderr, "sessionbus schema: unknown tool %q: known tools are %s\n", want, strings.Join(schema.Names(), ", "))
			return 2
		}
	}
	pick := func(name string) bool { return want == "" || name == want }
	if *openai {
		fns := schema.OpenAI(pick)
		if want != "" {
			printJSON(stdout, fns[0])
		} else {
			printJSON(stdout, fns)
		}
		return 0
	}
	docs := []schemaDoc{}
	for _, t := range schema.All() {
		if pick(t.Name) {
			docs = append(docs, schemaDoc{Name: t.Name, Description: t.Description, Parameters: t.Params, Result: t.Result})
		}
	}
	if want != "" {
		printJSON(stdout, docs[0])
	} else {
		printJSON(stdout, docs)
	}
	return 0
}
