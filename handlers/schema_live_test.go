package handlers_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
	"github.com/sessionbus/sessionbus/ops/search"
	"github.com/sessionbus/sessionbus/rules"
)

// TestSchemaValidatesLiveReplies calls every tool through NATS against a
// real server, in its result shapes and its failure replies, and validates
// each reply against the tool's published result schema (which forbids
// fields it does not name).
func TestSchemaValidatesLiveReplies(t *testing.T) {
	s := handlerstest.Start(t, func(c *config.Config) {
		c.Tools.Sessions.Visibility = "agent"
		optInSearch(c)
	})
	const main = "agent:main:main"
	s.Import(importer.ImportOptions{SessionKey: main, Label: "home"},
		`{"role":"user","content":"hello there"}`,
		`{"type":"message","message":{"role":"assistant","content":"hi, I am <think>x</think>here","usage":{"input":10,"output":2,"totalTokens":12}}}`,
		`{"role":"toolResult","content":"tool out"}`,
	)
	s.Import(importer.ImportOptions{SessionKey: "agent:main:discord:group:42", Label: "team"},
		`{"role":"user","content":"team chat"}`)

	caughtUp(t, s, startIndexer(t, s, search.Options{}))

	spawned := s.MustCall(main, "sessions_spawn", `{"task":"summarize","label":"kid","attachments":[{"name":"a.txt","content":"aGk=","encoding":"base64"}]}`)
	child, _ := spawned["childSessionKey"].(string)
	if child == "" {
		t.Fatalf("spawn: %v", spawned)
	}

	calls := []struct {
		as, tool, params string
		status           string // the reply's status field, when it has one to check
	}{
		{main, "sessions_list", `{}`, ""},
		{main, "sessions_list", `{"messageLimit":2,"includeDerivedTitles":true,"includeLastMessage":true,"limit":1}`, ""},
		{main, "sessions_history", `{"sessionKey":"main"}`, ""},
		{main, "sessions_history", `{"sessionKey":"main","offset":0,"limit":1,"includeTools":true}`, ""},
		{main, "sessions_history", `{"sessionKey":"nope"}`, "error"},
		{main, "sessions_send", `{"sessionKey":"agent:main:discord:group:42","message":"ping","timeoutSeconds":0}`, "accepted"},
		{main, "sessions_send", `{"label":"team","message":"ping","timeoutSeconds":0,"watch":true,"idempotencyKey":"k1"}`, "accepted"},
		{main, "sessions_send", `{"sessionKey":"x","label":"y","message":"m"}`, "error"},
		{main, "session_status", `{}`, ""},
		{main, "session_status", `{"changesSince":0}`, ""},
		{main, "session_status", `{"model":"default"}`, ""},
		{main, "sessions_yield", `{}`, "error"},
		{main, "subagents", `{}`, "ok"},
		{main, "subagents", `{"action":"kill","target":"nobody"}`, ""},
		{main, "subagents", `{"action":"steer","target":"kid","message":"faster"}`, ""},
		{main, "sessions_spawn", `{"task":"x","mode":"session"}`, "error"},
		{main, "agents_list", `{}`, ""},
		{main, "sessions_search", `{"query":"hello"}`, ""},
		{main, "sessions_search", `{"query":"nothing like it","limit":1,"offset":3,"sessionKey":"main"}`, ""},
		{main, "sessions_search", `{"query":"hello","sessionKey":"agent:other:main"}`, "forbidden"},
		{main, "sessions_history", "{\"sessionKey\":\"" + child + "\"}", ""},
	}
	seen := map[string]bool{}
	for _, c := range calls {
		tool, ok := schema.Lookup(c.tool)
		if !ok {
			t.Fatalf("no schema for %s", c.tool)
		}
		rs, err := tool.Result.Resolve(nil)
		if err != nil {
			t.Fatalf("%s result schema: %v", c.tool, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		data, err := bus.Call(ctx, s.Conn, s.Worker.Deps.Names, s.Token(bus.Caller{SessionKey: c.as}), c.tool, []byte(c.params))
		cancel()
		if err != nil {
			t.Errorf("%s %s: %v", c.tool, c.params, err)
			continue
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if err := rs.Validate(v); err != nil {
			t.Errorf("%s %s: reply does not match its schema: %v\n%s", c.tool, c.params, err, data)
		}
		if c.status != "" {
			if got := v.(map[string]any)["status"]; got != c.status {
				t.Errorf("%s %s: status %v, want %s (%s)", c.tool, c.params, got, c.status, data)
			}
		}
		seen[c.tool] = true
	}
	for _, name := range schema.Names() {
		if !seen[name] {
			t.Errorf("no live reply of %s was validated", name)
		}
	}
}

// TestSchemaRejectsForeignReplies shows the validation can fail: a reply
// with a field the schema does not name, or a wrong type, is refused.
func TestSchemaRejectsForeignReplies(t *testing.T) {
	tool, _ := schema.Lookup("sessions_list")
	rs, err := tool.Result.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"count":0,"sessions":[],"hasMore":false,"limitApplied":100,"extra":1}`,
		`{"count":"0","sessions":[],"hasMore":false,"limitApplied":100}`,
		`{"count":0,"hasMore":false,"limitApplied":100}`,
	} {
		var v any
		_ = json.Unmarshal([]byte(bad), &v)
		if rs.Validate(v) == nil {
			t.Errorf("%s validated", bad)
		}
	}
	var ok any
	_ = json.Unmarshal([]byte(`{"count":0,"sessions":[],"hasMore":false,"limitApplied":100}`), &ok)
	if err := rs.Validate(ok); err != nil {
		t.Errorf("a good reply fails: %v", err)
	}
}

// TestSchemaSubjectAndInfo: the schema subject offers each caller the tools
// its tool policy allows, and `nats micro info` carries every tool's
// schemas in its endpoint metadata.
func TestSchemaSubjectAndInfo(t *testing.T) {
	s := handlerstest.Start(t, nil)
	names := s.Worker.Deps.Names
	offered := func(as string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		m := nats.NewMsg(names.Schema())
		m.Header.Set(bus.HeaderToken, s.Token(bus.Caller{SessionKey: as}))
		reply, err := s.Conn.RequestMsgWithContext(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		var fns []schema.Function
		if err := json.Unmarshal(reply.Data, &fns); err != nil {
			t.Fatalf("%v: %s", err, reply.Data)
		}
		var out []string
		for _, f := range fns {
			if f.Type != "function" || f.Function.Parameters == nil || f.Function.Description == "" {
				t.Errorf("malformed function %+v", f)
			}
			out = append(out, f.Function.Name)
		}
		return out
	}
	// every tool but the opt-in ones, which config has not named
	want := slices.DeleteFunc(schema.Names(), func(n string) bool { return slices.Contains(rules.OptInTools, n) })
	if got := offered("agent:main:main"); !slices.Equal(got, want) || len(want) != len(schema.Names())-1 {
		t.Errorf("main session is offered %v, want %v", got, want)
	}
	// a leaf sub-agent: the same check a call passes decides
	leaf := "agent:main:subagent:c1"
	got := offered(leaf)
	for _, name := range schema.Names() {
		_, err := s.Call(leaf, name, `{}`)
		e, _ := bus.AsError(err)
		refused := e != nil && e.Code == bus.CodeForbidden
		if refused == slices.Contains(got, name) {
			t.Errorf("leaf sub-agent: %s offered=%v but refused=%v (%v)", name, slices.Contains(got, name), refused, err)
		}
	}
	if len(got) == 0 || len(got) == len(schema.Names()) {
		t.Errorf("leaf sub-agent offered %v: expected some but not all tools", got)
	}
	// no token: refused like a tool call
	if reply, err := s.Conn.Request(names.Schema(), nil, 10*time.Second); err != nil || reply.Header.Get(bus.HeaderServiceCode) != "401" {
		t.Errorf("schema without a token: %v %v", reply, err)
	}

	reply, err := s.Conn.Request("$SRV.INFO."+bus.ServiceName, nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(reply.Data, &info); err != nil {
		t.Fatal(err)
	}
	if len(reply.Data) > 64*1024 {
		t.Errorf("INFO is %d bytes", len(reply.Data))
	}
	if len(info.Endpoints) != len(schema.Names()) {
		t.Fatalf("INFO endpoints %d", len(info.Endpoints))
	}
	for _, ep := range info.Endpoints {
		tool, _ := schema.Lookup(ep.Name)
		for key, want := range map[string]any{"params_schema": tool.Params, "result_schema": tool.Result} {
			w, _ := json.Marshal(want)
			if ep.Metadata[key] != string(w) {
				t.Errorf("%s metadata %s = %.80s, want %.80s", ep.Name, key, ep.Metadata[key], w)
			}
		}
	}
}
