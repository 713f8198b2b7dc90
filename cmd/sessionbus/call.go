package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/client"
)

func cmdCall(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("call", stderr)
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "operator credentials used to mint the caller token")
	as := fs.String("as", "agent:main:main", "session key to call as")
	sandboxed := fs.Bool("sandboxed", false, "call as a sandboxed session")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the reply")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return 2
	}
	tool := fs.Arg(0)
	params := []byte("{}")
	if fs.NArg() == 2 {
		params = []byte(fs.Arg(1))
	}
	op, err := bus.LoadOperator(*creds)
	if err != nil {
		return fail(stderr, bus.CodeUnauthorized, err)
	}
	token, err := op.Mint(bus.Caller{SessionKey: *as, Sandboxed: *sandboxed}, 10*time.Minute)
	if err != nil {
		return fail(stderr, bus.CodeBadRequest, err)
	}
	nc, err := server.connect("sessionbus call", credsOptions(*creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	reply, err := client.New(nc, client.StaticToken(token), client.WithPrefix(*prefix)).Call(ctx, tool, json.RawMessage(params))
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	var out bytes.Buffer
	if json.Indent(&out, reply, "", "  ") != nil {
		out.Reset()
		out.Write(reply)
	}
	fmt.Fprintln(stdout, out.String())
	return 0
}

func cmdToken(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("token", stderr)
	creds := fs.String("creds", defaultCreds(), "operator credentials")
	as := fs.String("as", "", "session key the token speaks for (this or --adapter)")
	adapter := fs.String("adapter", "", "a channel adapter's token instead, for the channel named (or * for every channel): it brings human turns in on sb.inbound and calls no tool")
	agent := fs.String("agent", "", "agent id claim (default: from the key)")
	run := fs.String("run", "", "run id claim")
	sandboxed := fs.Bool("sandboxed", false, "mark the caller sandboxed")
	ttl := fs.Duration("ttl", time.Hour, fmt.Sprintf("how long the token is valid (at most %v)", bus.MaxTokenTTL))
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *ttl > bus.MaxTokenTTL {
		fmt.Fprintf(stderr, "sessionbus token: --ttl %v is above the maximum %v: use a shorter one and mint again when it runs out\n", *ttl, bus.MaxTokenTTL)
		return 2
	}
	if (*as == "") == (*adapter == "") || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: sessionbus token [--creds FILE] --as SESSIONKEY [--sandboxed] [--ttl 1h]\n       sessionbus token [--creds FILE] --adapter CHANNEL|'*' [--ttl 1h]")
		return 2
	}
	op, err := bus.LoadOperator(*creds)
	if err != nil {
		return fail(stderr, bus.CodeUnauthorized, err)
	}
	tok, err := op.Mint(bus.Caller{SessionKey: *as, AgentID: *agent, RunID: *run, Sandboxed: *sandboxed, Adapter: *adapter}, *ttl)
	if err != nil {
		return fail(stderr, bus.CodeBadRequest, err)
	}
	fmt.Fprintln(stdout, tok)
	return 0
}
