package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client"
	"github.com/sessionbus/sessionbus/client/mcpserver"
)

// cmdMCP serves the session tools to an MCP host as one session: on
// stdin/stdout (the host starts this command), or with --http as
// streamable HTTP on a loopback address.
func cmdMCP(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("mcp", stderr)
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "operator credentials used to mint the caller's tokens (not needed with --token)")
	token := fs.String("token", envOr("SESSIONBUS_TOKEN", ""), "a caller token from `sessionbus token` instead of --creds (it names the session; --as is then not needed); env SESSIONBUS_TOKEN")
	as := fs.String("as", "", "session key the MCP host acts as")
	sandboxed := fs.Bool("sandboxed", false, "act as a sandboxed session")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on this loopback host:port instead of stdio (e.g. 127.0.0.1:8765)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long one tool call may take (a sessions_send waiting longer gets its wait)")
	structured := fs.Bool("structured", false, "also send each tool's outputSchema and each result as structuredContent (for hosts that use structured results; the JSON text is always sent)")
	level := fs.String("log-level", "info", "log level (logs go to stderr)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || (*as == "") == (*token == "") {
		fmt.Fprintln(stderr, "sessionbus mcp: give the session to act as: --as SESSIONKEY (tokens minted from --creds) or --token TOKEN, one of them")
		fs.Usage()
		return 2
	}
	if *httpAddr != "" {
		if err := checkLoopback(*httpAddr); err != nil {
			fmt.Fprintf(stderr, "sessionbus mcp: --http %s: %v\n", *httpAddr, err)
			return 2
		}
	}
	log := newLogger(stderr, *level)
	var tokens client.TokenSource
	if *token != "" {
		tokens = client.StaticToken(*token)
	} else {
		var err error
		if tokens, err = client.FromCreds(*creds, bus.Caller{SessionKey: *as, Sandboxed: *sandboxed}, 0); err != nil {
			return fail(stderr, bus.CodeUnauthorized, err)
		}
	}
	nc, err := server.connect("sessionbus mcp", credsOptions(*creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	c := client.New(nc, tokens, client.WithPrefix(*prefix), client.WithTimeout(*timeout))

	sigs, release := catchStop()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()

	startCtx, startCancel := context.WithTimeout(ctx, *timeout)
	srv, err := mcpserver.New(startCtx, c, mcpserver.Options{Structured: *structured})
	startCancel()
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	if *httpAddr == "" {
		err := srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			fmt.Fprintf(stderr, "sessionbus mcp: %v\n", err)
			return 1
		}
		return 0
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintf(stderr, "sessionbus mcp: listen on %s: %v (pick a free port)\n", *httpAddr, err)
		return 1
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Info("mcp ready", "url", "http://"+ln.Addr().String()+"/")
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "sessionbus mcp: %v\n", err)
		return 1
	}
	return 0
}

// checkLoopback refuses an address other hosts could reach: whoever
// reaches the port calls the tools as the session, with no credentials of
// their own.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%v (want host:port, e.g. 127.0.0.1:8765)", err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("not a loopback address: anyone reaching it would act as the session; use 127.0.0.1 or [::1]")
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
