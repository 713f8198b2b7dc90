package schema

import (
	"testing"
)

// Every schema must resolve (a validator can use it), and the INFO
// metadata must stay small: micro INFO carries all of it in one reply.
func TestSchemasResolveAndMetadataIsSmall(t *testing.T) {
	total := 0
	for _, tool := range All() {
		if _, err := tool.Params.Resolve(nil); err != nil {
			t.Errorf("%s params: %v", tool.Name, err)
		}
		if _, err := tool.Result.Resolve(nil); err != nil {
			t.Errorf("%s result: %v", tool.Name, err)
		}
		if tool.Params.Type != "object" {
			t.Errorf("%s params: type %q, want object", tool.Name, tool.Params.Type)
		}
		for _, v := range Metadata(tool.Name) {
			total += len(v)
		}
	}
	if total == 0 || total > 32*1024 {
		t.Errorf("metadata of all tools is %d bytes; keep it within 32 KiB", total)
	}
	if _, ok := Lookup("nope"); ok || Metadata("nope") != nil {
		t.Error("an unknown tool was found")
	}
}
