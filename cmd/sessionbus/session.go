package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/lifecycle"
)

// cmdSession is `sessionbus session delete|reset KEY`: the request on
// <prefix>.ops.session.<op>, with an ops token (adapter '*') minted from
// the operator credentials; a worker archives the transcript, then
// deletes or resets the session (docs/ops.md).
func cmdSession(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "usage: sessionbus session delete|reset [flags] SESSIONKEY")
		fmt.Fprintln(stderr, "The transcript is archived (zstd JSONL, `sessionbus archive ls`) before anything is removed.")
	}
	if len(args) == 0 || (args[0] != "delete" && args[0] != "reset") {
		usage()
		return 2
	}
	op := args[0]
	fs := newFlags("session "+op, stderr)
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "operator credentials: mint the ops token and, with NATS auth, carry the NATS user (serve writes the admin's as operator.creds)")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the worker (a long transcript takes a while to archive)")
	fs.Usage = func() { usage(); fs.PrintDefaults() }
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	o, err := bus.LoadOperator(*creds)
	if err != nil {
		return fail(stderr, bus.CodeUnauthorized, err)
	}
	token, err := o.Mint(bus.Caller{Adapter: bus.AnyChannel}, *timeout+time.Minute)
	if err != nil {
		return fail(stderr, bus.CodeInternal, err)
	}
	nc, err := server.connect("sessionbus session "+op, credsOptions(*creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"sessionKey": fs.Arg(0)})
	fmt.Fprintf(stderr, "%s %s: archiving the transcript, then removing...\n", op, fs.Arg(0))
	reply, err := bus.SessionOp(ctx, nc, bus.NewNames(*prefix), op, token, body)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	var res lifecycle.Result
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	fmt.Fprintln(stderr, res.Summary())
	printJSON(stdout, &res)
	return 0
}
