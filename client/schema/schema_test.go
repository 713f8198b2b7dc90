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

// sessions_search is in the table with the index's bounds, and a result
// the handler sends validates while one with a stream sequence's name in
// it (the ops answer's "entry") does not.
func TestSessionsSearchSchema(t *testing.T) {
	tool, ok := Lookup("sessions_search")
	if !ok {
		t.Fatal("no sessions_search in the table")
	}
	p := tool.Params
	if len(p.Required) != 1 || p.Required[0] != "query" || *p.Properties["query"].MaxLength != 512 ||
		*p.Properties["limit"].Maximum != 25 || *p.Properties["offset"].Maximum != 10000 || p.Properties["sessionKey"] == nil {
		t.Fatalf("params schema: %+v", p)
	}
	rs, err := tool.Result.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{"results": []any{map[string]any{"sessionKey": "main", "sessionId": "s", "seq": 3, "role": "user",
		"timestamp": 1, "snippet": "a «b» c"}}, "count": 1, "hasMore": true, "nextOffset": 1, "indexing": true}
	if err := rs.Validate(good); err != nil {
		t.Errorf("a handler's result: %v", err)
	}
	bad := map[string]any{"results": []any{map[string]any{"sessionKey": "main", "entry": 3, "role": "user", "timestamp": 1, "snippet": "x", "seq": 9}}, "count": 1, "hasMore": false}
	if rs.Validate(bad) == nil {
		t.Error("a hit with a field the schema does not name validated")
	}
	if fns := OpenAI(func(n string) bool { return n == "sessions_search" }); len(fns) != 1 || fns[0].Function.Name != "sessions_search" {
		t.Errorf("OpenAI rendering: %+v", fns)
	}
}
