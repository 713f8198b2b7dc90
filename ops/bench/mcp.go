package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionbus/sessionbus/client"
	"github.com/sessionbus/sessionbus/client/mcpserver"
	"github.com/sessionbus/sessionbus/client/schema"
)

// roundtripSessions is how many sessions client_roundtrip and
// mcp_roundtrip list from (one page of roundtripLimit).
const (
	roundtripSessions = 100
	roundtripLimit    = 20
)

// runClientRoundtrip calls sessions_list {limit: 20} with the Go client
// (typed params and result) through NATS with a real token: the call an
// MCP host's tools/call turns into, without MCP.
func runClientRoundtrip(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSessions(ctx, roundtripSessions); err != nil {
		return Result{}, err
	}
	c := client.New(e.nc, client.StaticToken(e.token), client.WithPrefix(e.names.Prefix))
	cctx, cancel := opCtx(ctx)
	defer cancel()
	p := schema.SessionsListParams{Limit: roundtripLimit}
	first, err := c.SessionsList(cctx, p)
	if err != nil {
		return Result{}, err
	}
	if first.Count != roundtripLimit {
		return Result{}, fmt.Errorf("sessions_list through the client: count %d, want %d", first.Count, roundtripLimit)
	}
	r, err := measure(ctx, e.sz.fast, func() error {
		_, err := c.SessionsList(cctx, p)
		return err
	})
	r.Dataset = fmt.Sprintf("sessions_list limit %d of %d sessions, Go client", roundtripLimit, roundtripSessions)
	b, _ := json.Marshal(first)
	r.ReplyBytes = len(b)
	return r, err
}

// runMCPRoundtrip is client_roundtrip through the MCP server: an MCP
// client session (the go-sdk's) sends tools/call sessions_list over
// newline-delimited JSON-RPC on in-process pipes, stdio's framing, to the
// server `sessionbus mcp` runs, which calls through the Go client. Only the
// process boundary of a real stdio host is left out.
func runMCPRoundtrip(ctx context.Context, e *env) (Result, error) {
	if err := e.ensureSessions(ctx, roundtripSessions); err != nil {
		return Result{}, err
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	c := client.New(e.nc, client.StaticToken(e.token), client.WithPrefix(e.names.Prefix))
	srv, err := mcpserver.New(cctx, c, mcpserver.Options{})
	if err != nil {
		return Result{}, err
	}
	hostR, serverW := io.Pipe()
	serverR, hostW := io.Pipe()
	ss, err := srv.Connect(cctx, &mcp.IOTransport{Reader: serverR, Writer: serverW}, nil)
	if err != nil {
		return Result{}, err
	}
	defer ss.Close()
	host := mcp.NewClient(&mcp.Implementation{Name: "bench-host", Version: "1"}, nil)
	cs, err := host.Connect(cctx, &mcp.IOTransport{Reader: hostR, Writer: hostW}, nil)
	if err != nil {
		return Result{}, err
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "sessions_list", Arguments: map[string]any{"limit": roundtripLimit}}
	first, err := cs.CallTool(cctx, params)
	if err != nil {
		return Result{}, err
	}
	// the text content: the JSON every host reads
	var b []byte
	if len(first.Content) == 1 {
		if tc, ok := first.Content[0].(*mcp.TextContent); ok {
			b = []byte(tc.Text)
		}
	}
	var chk schema.SessionsListResult
	if first.IsError || json.Unmarshal(b, &chk) != nil || chk.Count != roundtripLimit {
		return Result{}, fmt.Errorf("tools/call sessions_list: error %v, %.300s", first.IsError, b)
	}
	r, err := measure(ctx, e.sz.fast, func() error {
		res, err := cs.CallTool(cctx, params)
		if err == nil && res.IsError {
			err = fmt.Errorf("tools/call sessions_list: tool error")
		}
		return err
	})
	r.Dataset = fmt.Sprintf("tools/call sessions_list limit %d of %d sessions, MCP over stdio framing (in-process pipes)", roundtripLimit, roundtripSessions)
	r.ReplyBytes = len(b)
	return r, err
}
