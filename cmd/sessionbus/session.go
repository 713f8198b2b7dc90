package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
)

// cmdSession is `sessionbus session delete|reset|goal|compact|tools|send-policy|pin|unpin|stop|queue
// ...`: the request on <prefix>.ops.session.<op>, with an ops token
// (adapter '*') minted from the operator credentials. delete and reset
// archive the transcript first, then remove; goal sets or clears the
// session's goal; compact has a gateway summarize the session's context;
// tools prints its effective tool list; send-policy sets its send-policy
// override; pin and unpin set its pinned flag (both on the op pin); stop
// aborts its running turn; queue sets its queue mode (docs/ops.md).
func cmdSession(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	op := ""
	if len(args) > 0 {
		op = args[0]
	}
	switch op {
	case "delete", "reset", "goal", "compact", "tools", "send-policy", "pin", "unpin", "stop", "queue":
	case "-h", "--help", "-help", "help":
		// every subcommand's flags: the help lists them all
		sessionFlags(newFlags("session", stdout), "all").fs.Usage()
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
	body, ok := sessionOpBody(op, fs.Args(), clear, actor, f.instructions)
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
	switch op {
	case "delete", "reset":
		fmt.Fprintf(stderr, "%s %s: archiving the transcript, then removing...\n", op, fs.Arg(0))
	case "compact":
		fmt.Fprintf(stderr, "compact %s: a gateway summarizes the context with the session's model...\n", fs.Arg(0))
	}
	subject := op
	if op == "unpin" {
		subject = "pin" // {"pinned": false}
	}
	reply, err := bus.SessionOp(ctx, nc, bus.NewNames(*prefix), subject, token, body)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	switch op {
	case "goal":
		return printGoalResult(reply, stdout, stderr)
	case "compact":
		return printCompactResult(reply, stdout, stderr)
	}
	if op == "tools" {
		return printToolsResult(reply, *f.json, stdout, stderr)
	}
	if op == "send-policy" {
		return printSendPolicyResult(reply, stdout, stderr)
	}
	if op == "stop" {
		return printStopResult(reply, stdout, stderr)
	}
	if op == "pin" || op == "unpin" {
		return printPinResult(reply, stdout, stderr)
	}
	if op == "queue" {
		return printQueueResult(reply, stdout, stderr)
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
func sessionOpBody(op string, args []string, clear *bool, actor, instructions *string) ([]byte, bool) {
	m := map[string]any{}
	switch {
	case op == "send-policy" && len(args) == 2:
		m["sendPolicy"] = args[1] // a bad word is the worker's to refuse, with its message
	case op == "send-policy":
		return nil, false
	case (op == "pin" || op == "unpin") && len(args) == 1:
		m["pinned"] = op == "pin"
	case op == "queue" && len(args) == 2:
		m["mode"] = args[1] // a word that is no mode is the worker's to refuse, in OpenClaw's words
	case op == "queue":
		return nil, false
	case op == "compact" && len(args) == 1:
		if *instructions != "" {
			m["instructions"] = *instructions
		}
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
	return printReply(stdout, reply)
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
		return printReply(stdout, reply)
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
	return printReply(stdout, reply)
}

// printQueueResult says what the session's queue is now (stderr) and
// prints the reply (stdout).
func printQueueResult(reply []byte, stdout, stderr io.Writer) int {
	var res struct{ SessionKey, Mode, Text string }
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	fmt.Fprintf(stderr, "queue of %s: %s (%s)\n", res.SessionKey, res.Mode, res.Text)
	return printReply(stdout, reply)
}

// printStopResult says whether a turn was stopped (stderr) and prints the
// reply (stdout); no running turn is no failure.
func printStopResult(reply []byte, stdout, stderr io.Writer) int {
	var res struct{ Status, SessionKey, RunID string }
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	if res.Status == "aborted" {
		fmt.Fprintf(stderr, "stop %s: run %s aborted\n", res.SessionKey, res.RunID)
	} else {
		fmt.Fprintf(stderr, "stop %s: no turn was running; nothing changed\n", res.SessionKey)
	}
	return printReply(stdout, reply)
}

// printPinResult says what the pin did (stderr) and prints the reply
// (stdout).
func printPinResult(reply []byte, stdout, stderr io.Writer) int {
	var res struct {
		Status     string `json:"status"`
		SessionKey string `json:"sessionKey"`
		Pinned     bool   `json:"pinned"`
	}
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	state := "unpinned"
	if res.Pinned {
		state = "pinned"
	}
	fmt.Fprintf(stderr, "%s: %s (%s)\n", res.SessionKey, state, res.Status)
	return printReply(stdout, reply)
}

// sessionCmdFlags are the flags of session delete, reset, goal, compact
// and tools (clear and actor only for goal, instructions only for compact,
// json only for tools).
type sessionCmdFlags struct {
	fs            *flag.FlagSet
	server        serverFlags
	creds, prefix *string
	timeout       *time.Duration
	clear         *bool
	actor         *string
	json          *bool
	instructions  *string
}

// sessionFlags defines op's flags; op "all" defines every subcommand's
// (for the help).
func sessionFlags(fs *flag.FlagSet, op string) sessionCmdFlags {
	f := sessionCmdFlags{
		fs:      fs,
		server:  newServerFlags(fs),
		creds:   fs.String("creds", defaultCreds(), "operator credentials: mint the ops token and, with NATS auth, carry the NATS user (serve writes the admin's as operator.creds)"),
		prefix:  fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)"),
		timeout: fs.Duration("timeout", 10*time.Minute, "how long to wait for the worker (a long transcript takes a while to archive)"),
	}
	if op == "goal" || op == "all" {
		f.clear = fs.Bool("clear", false, "goal: clear the goal instead of setting it")
		f.actor = fs.String("actor", envOr("USER", "ops"), "goal: who changes the goal, as the goal and the signal log record it")
	}
	if op == "compact" || op == "all" {
		f.instructions = fs.String("instructions", "", "compact: what the summary should focus on, as OpenClaw's /compact takes it")
	}
	if op == "tools" || op == "all" {
		f.json = fs.Bool("json", false, "tools: print each tool's verdict, stage and key as JSON instead of the list")
	}
	return f
}

// printCompactResult says what the compaction did (stderr), prints the
// reply (stdout), and exits 1 when nothing was compacted.
func printCompactResult(reply []byte, stdout, stderr io.Writer) int {
	var res struct {
		Status, SessionKey, RunID, Result, Error string
	}
	if err := json.Unmarshal(reply, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("unexpected reply %q: %v", reply, err))
	}
	var v any
	_ = json.Unmarshal(reply, &v)
	printJSON(stdout, v)
	switch res.Status {
	case "ok":
		fmt.Fprintf(stderr, "compact %s: %s\n", res.SessionKey, res.Result)
		return 0
	case "accepted":
		fmt.Fprintf(stderr, "compact %s: still running as run %s (`sessionbus runs` shows its outcome)\n", res.SessionKey, res.RunID)
		return 0
	}
	fmt.Fprintf(stderr, "compact %s: not compacted: %s\n", res.SessionKey, res.Error)
	return 1
}
