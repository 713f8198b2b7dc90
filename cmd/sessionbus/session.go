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

// cmdSession is `sessionbus session delete|reset|goal|tools|send-policy ...`: the
// request on <prefix>.ops.session.<op>, with an ops token (adapter '*')
// minted from the operator credentials. delete and reset archive the
// transcript first, then remove; goal sets or clears the session's goal;
// tools prints its effective tool list; send-policy sets its send-policy
// override (docs/ops.md).
func cmdSession(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	op := ""
	if len(args) > 0 {
		op = args[0]
	}
	switch op {
	case "delete", "reset", "goal", "tools", "send-policy":
	case "-h", "--help", "-help", "help":
		// every subcommand's flags, goal's and tools' included: the help lists them all
		sessionFlags(newFlags("session", stdout), "").fs.Usage()
		return 0
	default:
		writeHelp(stderr, "session", nil)
		return 2
	}
	f := sessionFlags(newFlags("session "+op, stderr), op)
	if err := f.fs.Parse(args[1:]); err != nil {
		return 2
	}
	fs, server, creds, prefix, timeout, clear, actor := f.fs, f.server, f.creds, f.prefix, f.timeout, f.clear, f.actor
	body, ok := sessionOpBody(op, fs.Args(), clear, actor)
	if !ok {
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
	if op == "delete" || op == "reset" {
		fmt.Fprintf(stderr, "%s %s: archiving the transcript, then removing...\n", op, fs.Arg(0))
	}
	reply, err := bus.SessionOp(ctx, nc, bus.NewNames(*prefix), op, token, body)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	if op == "goal" {
		return printGoalResult(reply, stdout, stderr)
	}
	if op == "tools" {
		return printToolsResult(reply, *f.json, stdout, stderr)
	}
	if op == "send-policy" {
		return printSendPolicyResult(reply, stdout, stderr)
	}
	var res lifecycle.Result
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	fmt.Fprintln(stderr, res.Summary())
	printJSON(stdout, &res)
	return 0
}

// sessionOpBody is the request body of op with the positional args, or
// false on a usage error: delete and reset take the key; goal the key and
// the text, or with --clear the key alone.
func sessionOpBody(op string, args []string, clear *bool, actor *string) ([]byte, bool) {
	m := map[string]any{}
	switch {
	case op == "send-policy" && len(args) == 2:
		m["sendPolicy"] = args[1] // a bad word is the worker's to refuse, with its message
	case op == "send-policy":
		return nil, false
	case op != "goal" && len(args) == 1:
	case op == "goal" && *clear && len(args) == 1:
		m["clear"] = true
	case op == "goal" && !*clear && len(args) == 2:
		m["goal"] = args[1] // an empty text is the worker's to refuse, with its message
	default:
		return nil, false
	}
	m["sessionKey"] = args[0]
	if op == "goal" && *actor != "" {
		m["actor"] = *actor
	}
	b, _ := json.Marshal(m)
	return b, true
}

// printGoalResult says what the goal change did (stderr) and prints the
// reply (stdout).
func printGoalResult(reply []byte, stdout, stderr io.Writer) int {
	var res struct {
		Status     string `json:"status"`
		SessionKey string `json:"sessionKey"`
	}
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	fmt.Fprintf(stderr, "goal of %s: %s\n", res.SessionKey, res.Status)
	var v any
	_ = json.Unmarshal(reply, &v)
	printJSON(stdout, v)
	return 0
}

// printToolsResult prints a session's effective tool list: as the worker
// words it, or with --json the reply (each tool's verdict, stage and key).
func printToolsResult(reply []byte, asJSON bool, stdout, stderr io.Writer) int {
	var res struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(reply, &res); err != nil || res.Text == "" {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	if asJSON {
		var v any
		_ = json.Unmarshal(reply, &v)
		printJSON(stdout, v)
		return 0
	}
	fmt.Fprintln(stdout, res.Text)
	return 0
}

// printSendPolicyResult says what the override change did (stderr) and
// prints the reply (stdout).
func printSendPolicyResult(reply []byte, stdout, stderr io.Writer) int {
	var res struct {
		Status     string `json:"status"`
		SessionKey string `json:"sessionKey"`
		Text       string `json:"text"`
	}
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	fmt.Fprintf(stderr, "send policy of %s: %s. %s\n", res.SessionKey, res.Status, res.Text)
	var v any
	_ = json.Unmarshal(reply, &v)
	printJSON(stdout, v)
	return 0
}

// sessionCmdFlags are the flags of session delete, reset, goal and tools
// (clear and actor only for goal, json only for tools).
type sessionCmdFlags struct {
	fs            *flag.FlagSet
	server        serverFlags
	creds, prefix *string
	timeout       *time.Duration
	clear         *bool
	actor         *string
	json          *bool
}

// sessionFlags defines op's flags; op "" defines every subcommand's (for
// the help).
func sessionFlags(fs *flag.FlagSet, op string) sessionCmdFlags {
	f := sessionCmdFlags{
		fs:      fs,
		server:  newServerFlags(fs),
		creds:   fs.String("creds", defaultCreds(), "operator credentials: mint the ops token and, with NATS auth, carry the NATS user (serve writes the admin's as operator.creds)"),
		prefix:  fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)"),
		timeout: fs.Duration("timeout", 10*time.Minute, "how long to wait for the worker (a long transcript takes a while to archive)"),
	}
	if op == "goal" || op == "" {
		f.clear = fs.Bool("clear", false, "goal: clear the goal instead of setting it")
		f.actor = fs.String("actor", envOr("USER", "ops"), "goal: who changes the goal, as the goal and the signal log record it")
	}
	if op == "tools" || op == "" {
		f.json = fs.Bool("json", false, "tools: print each tool's verdict, stage and key as JSON instead of the list")
	}
	return f
}
