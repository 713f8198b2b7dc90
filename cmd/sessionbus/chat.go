package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/gateway/completion"
	"github.com/sessionbus/sessionbus/kv/sessions"
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
	server := newServerFlags(fs)
	creds := fs.String("creds", defaultCreds(), "operator credentials used to mint the adapter token")
	channel := fs.String("channel", defaultChatChannel, "the channel the message comes from (its reply is delivered on sb.deliver.<channel>)")
	from := fs.String("from", envOr("USER", "human"), "the sender's id on the channel")
	account := fs.String("account", "", "account id on the channel (optional)")
	thread := fs.String("thread", "", "thread id on the channel (optional)")
	idem := fs.String("idempotency-key", "", "a retried message with the same key never runs twice (optional)")
	timeout := fs.Int("timeout", 60, "seconds to wait for the reply; 0 returns once the turn is accepted")
	prefix := fs.String("prefix", bus.DefaultPrefix, "subject prefix (bus.prefix)")
	stream := fs.Bool("stream", false, "print the reply as the turn produces it (its live output on sb.live.<key>), then a newline")
	route := fs.Bool("route", false, "name no session: the worker routes the message to its session as OpenClaw does (session.dmScope, bindings), creating it when new")
	group := fs.String("group", "", "with --route: the group or channel id the message was posted in")
	chatType := fs.String("chat-type", "", "with --route: direct, group or channel (default: group with --group, else direct)")
	agent := fs.String("agent", "", "with --route: the agent to route to, instead of the bindings")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if wantArgs := map[bool]int{true: 1, false: 2}[*route]; fs.NArg() != wantArgs || *timeout < 0 {
		fs.Usage()
		return 2
	}
	if !*route && (*group != "" || *chatType != "" || *agent != "") {
		fmt.Fprintln(stderr, "sessionbus chat: --group, --chat-type and --agent describe a routed message: add --route (and drop the session key)")
		return 2
	}
	if *route && *stream {
		fmt.Fprintln(stderr, "sessionbus chat: --stream follows a session named up front, and --route lets the worker choose it: drop one of them")
		return 2
	}
	if *stream && *timeout == 0 {
		fmt.Fprintln(stderr, "sessionbus chat: --stream prints the turn as it runs, so it waits: give --timeout 1 or more (not 0)")
		return 2
	}
	if *stream && *idem == "" {
		// the ingress answers at once with the run id a key derives, and a
		// second request with the key waits for that run without starting
		// another: so the live output can be told apart from other runs'
		// before the turn starts
		*idem = "chat-" + sessions.NewID()
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
	msg := bus.InboundMessage{
		Channel: ch, From: *from, Text: fs.Arg(fs.NArg() - 1),
		AccountID: *account, ThreadID: *thread, IdempotencyKey: *idem,
		TimeoutSeconds: *timeout,
	}
	if *route {
		msg.GroupID, msg.ChatType, msg.AgentID = *group, *chatType, *agent
	} else {
		msg.SessionKey = fs.Arg(0)
	}
	nc, err := server.connect("sessionbus chat", credsOptions(*creds)...)
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	defer nc.Close()
	// the worker answers by the turn's own deadline: leave it room
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout)*time.Second+30*time.Second)
	defer cancel()
	names := bus.NewNames(*prefix)
	var res inboundReply
	streamed := false
	if *stream {
		res, streamed, err = chatStream(ctx, nc, names, token, msg, stdout)
	} else {
		res, err = bus.SendInbound(ctx, nc, names, token, msg)
	}
	if err != nil {
		return fail(stderr, bus.CodeUnavailable, err)
	}
	if *route {
		// stdout is the reply only; where the message went is news for the person
		fmt.Fprintf(stderr, "routed to %s%s\n", res.SessionKey, map[bool]string{true: " (new session)"}[res.Created])
	}
	switch {
	case res.Status == "ok" && (strings.TrimSpace(res.Reply) == "" || completion.Silent(res.Reply)):
		// stdout carries the reply: it stays empty, so a script sees
		// nothing to send, and the person at the terminal is told why
		fmt.Fprintln(stderr, chatSilence)
		return 0
	case res.Status == "ok" && streamed:
		return 0
	case res.Status == "ok":
		if *stream {
			fmt.Fprintln(stderr, "sessionbus chat: the live output did not carry the whole reply (its runtime streams none, or messages were dropped); the reply as recorded follows")
		}
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
