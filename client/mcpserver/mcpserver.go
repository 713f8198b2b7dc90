// Package mcpserver offers the session tools to MCP hosts: one MCP tool
// per session tool the caller may call, each call made through the Go
// client as that caller. Which tools are offered is the workers' answer on
// the schema subject, so the caller's tool policy applies exactly as it
// does to its calls (a sub-agent session sees only its own tool set).
package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client"
	"github.com/sessionbus/sessionbus/client/schema"
)

// Name is the MCP server's implementation name.
const Name = "sessionbus"

// Options configure the MCP server.
type Options struct {
	// Structured adds each tool's result schema (outputSchema) to the tool
	// list and each reply as structuredContent, besides the JSON text
	// every host reads. It sends each reply twice, and in the benchmark
	// (mcp_roundtrip) costs about as much as the rest of MCP's overhead,
	// so it is for hosts that use structured results.
	Structured bool
}

// New builds an MCP server for c's caller. It asks the workers which
// tools the caller may call, so a worker must be running.
func New(ctx context.Context, c *client.Client, o Options) (*mcp.Server, error) {
	fns, err := c.Tools(ctx)
	if err != nil {
		return nil, fmt.Errorf("ask the workers for the caller's tools: %w", err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Version: bus.Version}, nil)
	for _, f := range fns {
		t := &mcp.Tool{Name: f.Function.Name, Description: f.Function.Description, InputSchema: inputSchema(f.Function.Parameters)}
		if st, ok := schema.Lookup(f.Function.Name); ok && o.Structured {
			t.OutputSchema = outputSchema(st.Result)
		}
		s.AddTool(t, handler(c, f.Function.Name, o.Structured))
	}
	return s, nil
}

// inputSchema is the tool's parameter schema; a tool without parameters
// still needs an object schema with properties for some hosts.
func inputSchema(p *jsonschema.Schema) *jsonschema.Schema {
	if p == nil {
		p = &jsonschema.Schema{Type: "object"}
	}
	if p.Properties == nil {
		p.Properties = map[string]*jsonschema.Schema{}
	}
	return p
}

// outputSchema is the result schema typed as an object, as MCP requires
// of an outputSchema (every result shape is one).
func outputSchema(r *jsonschema.Schema) *jsonschema.Schema {
	r.Type = "object"
	return r
}

// handler calls tool with the host's arguments as they are: the worker
// checks them (and accepts the snake_case spellings too). The reply is its
// JSON text, and with structured also the structured content. A thrown error ({error, code}) is a tool error the model sees, not
// a protocol error: it says what was wrong with the call.
func handler(c *client.Client, tool string, structured bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		reply, err := c.Call(ctx, tool, args)
		if err != nil {
			e, ok := bus.AsError(err)
			if !ok {
				e = &bus.Error{Code: bus.CodeUnavailable, Message: err.Error()}
			}
			b, _ := json.Marshal(e)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(reply)}}}
		if structured {
			res.StructuredContent = reply
		}
		return res, nil
	}
}
