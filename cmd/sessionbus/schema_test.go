package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/client/schema"
)

func TestSchemaCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"schema"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var all []schemaDoc
	if err := json.Unmarshal(out.Bytes(), &all); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range all {
		names = append(names, d.Name)
		if d.Parameters == nil || d.Result == nil {
			t.Errorf("%s: no schemas", d.Name)
		}
	}
	if !slices.Equal(names, schema.Names()) {
		t.Errorf("tools %v", names)
	}

	out.Reset()
	if code := run([]string{"schema", "--openai", "sessions_history"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var fn schema.Function
	if err := json.Unmarshal(out.Bytes(), &fn); err != nil || fn.Function.Name != "sessions_history" || fn.Function.Parameters.Properties["sessionKey"] == nil {
		t.Errorf("openai sessions_history: %v %s", err, out.String())
	}

	errb.Reset()
	if code := run([]string{"schema", "nope"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown tool "nope": known tools are sessions_list`) {
		t.Errorf("unknown tool: exit %d, %s", code, errb.String())
	}
}
