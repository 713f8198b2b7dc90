package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway/completion"
)

// defaultChatChannel is the channel `chat` speaks on unless told.
const defaultChatChannel = "terminal"

// chatSilence is what chat says on stderr when the turn ended ok with no
// reply (it yielded, or answered NO_REPLY): an empty line looked broken.
const chatSilence = "(no reply: the agent chose silence)"

// cmdChat plays a human on a channel: it sends one message into a session
// through the ingress (sb.inbound) with a channel adapter's token, waits
// for the turn and prints the reply on stdout. Exit 0 with a reply (or,
// with --timeout 0, once accepted; or with none, said on stderr), 1 when refused or the turn failed or
// did not finish in time, 2 on a usage error.
func cmdChat(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("chat", stderr)
	server := fs.String("server", envOr("SESSIONBUS_SERVER", defaultServer), "NATS server URL")
	creds := fs.String("creds", defaultCreds(), "operator credentials used to mint the adapter token")
	channel := fs.String("channel", defaultChatChannel, "the channel the message comes from (its reply is delivered on sb.deliver.<channel>)")
	from := fs.String("from", envOr("USER", "human"), "the sender's id on the channel")
	account := fs.String("account", "", "account id on the channel (optional)")
	thread := fs.String("thread", "", "thread id on the channel (optional)")
	idem := fs.String("idempotency-key", "", "a retried message with the same key never runs twice (optional)")
	timeout := fs.Int("timeout", 60, "seconds to wait for the reply; 0 returns once the turn is accepted")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 || *timeout < 0 {
		fs.Usage()
		return 2
	}
	ch, err := bus.NormalizeChannel(*channel)
	if err != nil {
		fmt.Fprintf(stderr, "sessionbus chat: --channel: %v\n", err)
		return 2
	}
	op, err := bus.LoadOperator(*creds)
	if err != nil {
		return fail(stderr, bus.CodeUnauthorized, err)
	}
	token, err := op.Mint(bus.Caller{Adapter: ch}, time.Duration(*timeout)*time.Second+time.Minute)
	if err != nil {
		return fail(stderr, bus.CodeBadRequest, err)
	}
	body, _ := json.Marshal(map[string]any{
		"sessionKey": fs.Arg(0), "channel": ch, "from": *from, "text": fs.Arg(1),
		"accountId": *account, "threadId": *thread, "idempotencyKey": *idem,
		"timeoutSeconds": *timeout,
	})
	nc, err := connect(*server, "sessionbus chat", credsOptions(*creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	// the worker answers by the turn's own deadline: leave it room
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout)*time.Second+30*time.Second)
	defer cancel()
	data, err := bus.Inbound(ctx, nc, bus.NewNames(*prefix), token, body)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	var res struct {
		Status, RunID, SessionKey, Reply, Error string
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return fail(stderr, bus.CodeInternal, fmt.Errorf("the ingress answered something else than its JSON reply: %v: %.200s", err, data))
	}
	switch {
	case res.Status == "ok" && (strings.TrimSpace(res.Reply) == "" || completion.Silent(res.Reply)):
		// stdout carries the reply: it stays empty, so a script sees
		// nothing to send, and the person at the terminal is told why
		fmt.Fprintln(stderr, chatSilence)
		return 0
	case res.Status == "ok":
		fmt.Fprintln(stdout, res.Reply)
		return 0
	case res.Status == "accepted" && *timeout == 0:
		fmt.Fprintf(stderr, "accepted: run %s in %s; its reply goes to %s\n", res.RunID, res.SessionKey, bus.NewNames(*prefix).Deliver(ch))
		return 0
	case res.Status == "accepted":
		fmt.Fprintf(stderr, "no reply within %ds: run %s goes on, and its reply goes to %s\n", *timeout, res.RunID, bus.NewNames(*prefix).Deliver(ch))
	default:
		fmt.Fprintf(stderr, "run %s: %s: %s\n", res.RunID, res.Status, res.Error)
	}
	return 1
}
