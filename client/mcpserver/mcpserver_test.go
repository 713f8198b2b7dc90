package mcpserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/client"
	"github.com/sessionbus/sessionbus/client/mcpserver"
	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

const mainKey = "agent:main:main"

// stack is a real server and worker with two sessions; the MCP server acts
// as caller. The config opts in to sessions_search, so every tool is
// offered to a main session.
func stack(t *testing.T, caller string, o mcpserver.Options) (*handlerstest.Stack, *mcp.Server) {
	t.Helper()
	s := handlerstest.Start(t, func(c *config.Config) { c.Tools.AlsoAllow = []string{"sessions_search"} })
	s.Import(importer.ImportOptions{SessionKey: mainKey, Label: "home"},
		`{"role":"user","content":"What is the capital of France?"}`,
		`{"role":"assistant","content":"Paris."}`)
	c := client.New(s.Conn, client.Minted(s.Operator, bus.Caller{SessionKey: caller}, 0))
	srv, err := mcpserver.New(bustest.Context(t), c, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, srv
}

// connectInMemory connects the SDK's own client to srv.
func connectInMemory(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(bustest.Context(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return connect(t, ct)
}

func connect(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil)
	cs, err := cl.Connect(bustest.Context(t), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call runs tools/call and returns the result (its JSON text), checked
// against the tool's published result schema; with structured, the
// structured content must be the same value.
func call(t *testing.T, cs *mcp.ClientSession, structured bool, tool string, args any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(bustest.Context(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %v", tool, text(res))
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(text(res)), &out); err != nil {
		t.Fatalf("%s text content: %v", tool, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	switch {
	case structured && !jsonEqual(text(res), b):
		t.Errorf("%s: text content %s differs from the structured content %s", tool, text(res), b)
	case !structured && res.StructuredContent != nil:
		t.Errorf("%s: structured content %s not asked for", tool, b)
	}
	st, _ := schema.Lookup(tool)
	rs, err := st.Result.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(out); err != nil {
		t.Errorf("%s result does not match its schema: %v", tool, err)
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func jsonEqual(a string, b []byte) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal(b, &y) == nil && string(mustJSON(x)) == string(mustJSON(y))
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// exercise lists the tools and calls sessions_list, sessions_history and
// sessions_send, as an MCP host would.
func exercise(t *testing.T, cs *mcp.ClientSession, structured bool) {
	t.Helper()
	tools, err := cs.ListTools(bustest.Context(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil || (tl.OutputSchema != nil) != structured {
			t.Errorf("%s: description %q, input schema %v, output schema %v (structured %v)", tl.Name, tl.Description, tl.InputSchema != nil, tl.OutputSchema != nil, structured)
		}
	}
	if !slices.Equal(names, slices.Sorted(slices.Values(schema.Names()))) && !slices.Equal(names, schema.Names()) {
		t.Errorf("tools %v, want %v", names, schema.Names())
	}

	list := call(t, cs, structured, "sessions_list", map[string]any{"limit": 5})
	rows, _ := list["sessions"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["label"] != "home" {
		t.Errorf("sessions_list: %v", list)
	}
	hist := call(t, cs, structured, "sessions_history", map[string]any{"sessionKey": mainKey})
	msgs, _ := hist["messages"].([]any)
	if len(msgs) != 2 || msgs[1].(map[string]any)["content"] != "Paris." {
		t.Errorf("sessions_history: %v", hist)
	}
	sent := call(t, cs, structured, "sessions_send", map[string]any{"sessionKey": mainKey, "message": "and Spain?", "timeoutSeconds": 0})
	if sent["status"] != "accepted" || sent["runId"] == "" {
		t.Errorf("sessions_send: %v", sent)
	}
	// a bad argument is a tool error the model can read, not a protocol error
	res, err := cs.CallTool(bustest.Context(t), &mcp.CallToolParams{Name: "sessions_history", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(text(res), `"sessionKey required"`) || !strings.Contains(text(res), `"code":400`) {
		t.Errorf("sessions_history without sessionKey: %v %v", text(res), err)
	}
	// no indexer runs here: the host reads that one must, and how
	res, err = cs.CallTool(bustest.Context(t), &mcp.CallToolParams{Name: "sessions_search", Arguments: map[string]any{"query": "capital"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "sessionbus indexer") || !strings.Contains(text(res), `"code":503`) {
		t.Errorf("sessions_search without an indexer: %v %v", text(res), err)
	}
}

// The sessions_search tool is offered with its schema: the query it
// requires and the bounds the index applies.
func TestMCPSessionsSearchSchema(t *testing.T) {
	_, srv := stack(t, mainKey, mcpserver.Options{Structured: true})
	tools, err := connectInMemory(t, srv).ListTools(bustest.Context(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name != "sessions_search" {
			continue
		}
		in, _ := json.Marshal(tl.InputSchema)
		out, _ := json.Marshal(tl.OutputSchema)
		for _, want := range []string{`"required":["query"]`, `"maxLength":512`, `"maximum":25`, `"sessionKey"`, `"offset"`} {
			if !strings.Contains(string(in), want) {
				t.Errorf("input schema lacks %s: %s", want, in)
			}
		}
		for _, want := range []string{`"snippet"`, `"seq"`, `"sessionId"`, `"nextOffset"`} {
			if !strings.Contains(string(out), want) {
				t.Errorf("output schema lacks %s: %s", want, out)
			}
		}
		return
	}
	t.Fatal("sessions_search is not offered to a session that opted in")
}

func TestMCPInMemory(t *testing.T) {
	_, srv := stack(t, mainKey, mcpserver.Options{})
	exercise(t, connectInMemory(t, srv), false)
}

func TestMCPInMemoryStructured(t *testing.T) {
	_, srv := stack(t, mainKey, mcpserver.Options{Structured: true})
	exercise(t, connectInMemory(t, srv), true)
}

func TestMCPStreamableHTTP(t *testing.T) {
	_, srv := stack(t, mainKey, mcpserver.Options{})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close) // after the client session closes (cleanups run last first): Close waits for its stream
	exercise(t, connect(t, &mcp.StreamableClientTransport{Endpoint: hs.URL}), false)
}

// A sub-agent session's host is offered only its tool set: the tools the
// workers would not refuse with a 403.
func TestMCPAppliesToolPolicy(t *testing.T) {
	s, srv := stack(t, "agent:main:subagent:leaf", mcpserver.Options{})
	cs := connectInMemory(t, srv)
	tools, err := cs.ListTools(bustest.Context(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	offered := map[string]bool{}
	for _, tl := range tools.Tools {
		offered[tl.Name] = true
	}
	for _, name := range schema.Names() {
		_, err := s.Call("agent:main:subagent:leaf", name, `{}`)
		e, _ := bus.AsError(err)
		refused := e != nil && e.Code == bus.CodeForbidden
		if offered[name] == refused {
			t.Errorf("%s: offered %v, refused %v", name, offered[name], refused)
		}
	}
	if offered["sessions_list"] || offered["sessions_search"] || len(offered) == 0 {
		t.Errorf("leaf sub-agent offered %v", offered)
	}
}
