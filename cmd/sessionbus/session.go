package main

import (
	"context"
	"encoding/json"
	"flag"
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
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "delete", "reset":
	case "-h", "--help", "-help", "help":
		// delete and reset take the same flags: list them
		sessionFlags(newFlags("session", stdout)).fs.Usage()
		return 0
	default:
		writeHelp(stderr, "session", nil)
		return 2
	}
	f := sessionFlags(newFlags("session "+sub, stderr))
	if err := f.fs.Parse(args[1:]); err != nil {
		return 2
	}
	if f.fs.NArg() != 1 {
		f.fs.Usage()
		return 2
	}
	o, err := bus.LoadOperator(*f.creds)
	if err != nil {
		return fail(stderr, bus.CodeUnauthorized, err)
	}
	token, err := o.Mint(bus.Caller{Adapter: bus.AnyChannel}, *f.timeout+time.Minute)
	if err != nil {
		return fail(stderr, bus.CodeInternal, err)
	}
	nc, err := connect(*f.server, "sessionbus session "+sub, credsOptions(*f.creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *f.timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"sessionKey": f.fs.Arg(0)})
	fmt.Fprintf(stderr, "%s %s: archiving the transcript, then removing...\n", sub, f.fs.Arg(0))
	reply, err := bus.SessionOp(ctx, nc, bus.NewNames(*f.prefix), sub, token, body)
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

// sessionCmdFlags are the flags of session delete and session reset.
type sessionCmdFlags struct {
	fs                    *flag.FlagSet
	server, creds, prefix *string
	timeout               *time.Duration
}

func sessionFlags(fs *flag.FlagSet) sessionCmdFlags {
	return sessionCmdFlags{
		fs:      fs,
		server:  fs.String("server", envOr("SESSIONBUS_SERVER", defaultServer), "NATS server URL"),
		creds:   fs.String("creds", defaultCreds(), "operator credentials: mint the ops token and, with NATS auth, carry the NATS user (serve writes the admin's as operator.creds)"),
		prefix:  fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)"),
		timeout: fs.Duration("timeout", 10*time.Minute, "how long to wait for the worker (a long transcript takes a while to archive)"),
	}
}
