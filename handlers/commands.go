package handlers

import (
	"context"
	"strings"
	"unicode"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// The chat commands of the ingress (docs/inbound.md, "Chat commands"): a
// human's message whose first word is a command word is answered by the
// worker and queues no turn, as OpenClaw's gateway handles its commands.
// Their texts are OpenClaw's (commands_text.go). A /word no command takes
// goes to the model as an ordinary message, as OpenClaw passes it.

// chatCommand is one command of the table: how it reads the message and
// what it does. parse sees the whole text; ok false leaves the message an
// ordinary one (`/send it now please`). run answers the command.
type chatCommand struct {
	// owner: only senders in commands.ownerAllowFrom may run it; anyone
	// else is answered OpenClaw's refusal and nothing changes.
	owner bool
	parse func(d *Deps, text string) (any, bool)
	run   func(ctx context.Context, d *Deps, ip inboundParams, parsed any) (*inboundResult, error)
}

// chatCommands maps a command word (lower-case, with its slash) to its
// command. The queue engine's commands (/steer, /tell, /queue) plug in
// here, under their words, like the others.
var chatCommands = map[string]*chatCommand{
	// `/stop` aborts the session's running turn (stop.go)
	"/stop": {
		parse: func(_ *Deps, text string) (any, bool) { return nil, isStopCommand(text) },
		run: func(ctx context.Context, d *Deps, ip inboundParams, _ any) (*inboundResult, error) {
			return d.inboundStop(ctx, ip)
		},
	},
	// `/goal ...` changes the session's goal (goal_inbound.go)
	"/goal": {
		parse: func(_ *Deps, text string) (any, bool) { return parseGoalCommand(text) },
		run: func(ctx context.Context, d *Deps, ip inboundParams, cmd any) (*inboundResult, error) {
			return d.inboundGoal(ctx, ip, cmd.(goalCommand))
		},
	},
	// `/tools` lists the session's effective tools (tools_effective.go)
	"/tools": {
		parse: func(_ *Deps, text string) (any, bool) { return nil, isToolsCommand(text) },
		run: func(ctx context.Context, d *Deps, ip inboundParams, _ any) (*inboundResult, error) {
			return d.inboundTools(ctx, ip)
		},
	},
	// `/send on|off|inherit` sets the send-policy override (send_override.go)
	"/send": {
		owner: true,
		parse: func(_ *Deps, text string) (any, bool) { return parseSendCommand(text) },
		run: func(ctx context.Context, d *Deps, ip inboundParams, word any) (*inboundResult, error) {
			return d.inboundSend(ctx, ip, word.(string))
		},
	},
	"/status":    textCommand(cmdStatus),
	"/subagents": textCommand(cmdSubagents),
	"/focus":     textCommand(cmdFocus),
	"/unfocus":   textCommand(cmdUnfocus),
	"/session":   textCommand(cmdSession),
	"/context":   textCommand(cmdContext),
	"/compact":   textCommand(cmdCompact),
	"/model":     textCommand(cmdModel),
	"/models":    textCommand(cmdModel),
	"/think":     textCommand(cmdThink),
	"/thinking":  textCommand(cmdThink),
	"/t":         textCommand(cmdThink),
}

// textCommand is a command whose answer is one text: it takes the words
// after the command word (after an optional ':', `/think: high`).
func textCommand(fn func(ctx context.Context, d *Deps, ip inboundParams, args string) (string, error)) *chatCommand {
	return &chatCommand{
		parse: func(_ *Deps, text string) (any, bool) {
			_, args, ok := splitCommand(text)
			return args, ok
		},
		run: func(ctx context.Context, d *Deps, ip inboundParams, args any) (*inboundResult, error) {
			text, err := fn(ctx, d, ip, args.(string))
			if err != nil {
				return nil, err
			}
			return d.answerCommand(ctx, ip, text), nil
		},
	}
}

// splitCommand reads `/word[:] args`: the command word, lower-cased, and
// the rest, trimmed. ok is false for a text that does not start with a
// slash word.
func splitCommand(text string) (word, args string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	end := strings.IndexFunc(text, func(r rune) bool { return unicode.IsSpace(r) || r == ':' })
	if end < 0 {
		end = len(text)
	}
	word, args = strings.ToLower(text[:end]), text[end:]
	args = strings.TrimSpace(strings.TrimPrefix(args, ":"))
	return word, args, len(word) > 1
}

// findCommand is the command the message is, with what its parser read;
// nil for an ordinary message. Reset triggers (session.resetTriggers) are
// configured words, so they are matched after the table.
func (d *Deps) findCommand(text string) (*chatCommand, any) {
	if word, _, ok := splitCommand(text); ok {
		if c := chatCommands[word]; c != nil {
			if parsed, ok := c.parse(d, text); ok {
				return c, parsed
			}
			return nil, nil
		}
	}
	// `/new`, `/reset` start the session over (reset_inbound.go)
	if cmd, ok := parseResetCommand(text, d.Config.Session.ResetTriggers); ok {
		return resetChatCommand, cmd
	}
	return nil, nil
}

var resetChatCommand = &chatCommand{
	run: func(ctx context.Context, d *Deps, ip inboundParams, cmd any) (*inboundResult, error) {
		return d.inboundReset(ctx, ip, cmd.(resetCommand))
	},
}

// runCommand answers a command message; handled is false for an ordinary
// message, which becomes a turn.
func (d *Deps) runCommand(ctx context.Context, ip inboundParams) (res *inboundResult, handled bool, err error) {
	c, parsed := d.findCommand(ip.text)
	if c == nil {
		return nil, false, nil
	}
	if c.owner && !d.Config.CommandOwner(ip.channel, ip.from) {
		// OpenClaw answers a non-owner and writes nothing
		d.Log.Info("inbound: owner-only command from a sender not in commands.ownerAllowFrom", "session", ip.sessionKey, "channel", ip.channel)
		return d.answerCommand(ctx, ip, notOwnerText(ip.channel, ip.from)), true, nil
	}
	res, err = c.run(ctx, d, ip, parsed)
	return res, true, err
}

// commandOpID is the id of a command's answer: derived from the
// idempotency key when there is one, so a retried command answers once.
func commandOpID(ip inboundParams) string {
	if ip.idempotencyKey != "" {
		return inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
	}
	return sessions.NewID()
}

// answerCommand publishes a command's answer to the route the message came
// from (no run, the route as it was) and returns it as the ingress's
// reply. An empty text (OpenClaw's silent /subagents kill) publishes
// nothing.
func (d *Deps) answerCommand(ctx context.Context, ip inboundParams, text string) *inboundResult {
	opID := commandOpID(ip)
	if text != "" {
		if err := d.deliverGoalAnswer(ctx, ip, opID, text); err != nil {
			d.Log.Warn("inbound: delivering a command's answer failed", "session", ip.sessionKey, "err", err)
		}
	}
	return &inboundResult{Status: "ok", RunID: opID, SessionKey: ip.sessionKey, Reply: text}
}

// commandSession reads the session a command acts on; an unknown one is
// refused (404) as every command refuses it.
func (d *Deps) commandSession(ctx context.Context, key string) (*sessions.Entry, error) {
	e, _, err := d.Store.Get(ctx, key)
	if err != nil {
		return nil, d.goalSessionErr(key, err)
	}
	return e, nil
}

// commandRequester is the session itself as a tool caller: the commands
// act with its rights, as OpenClaw's run in the session's context.
func (d *Deps) commandRequester(key string) (*requester, error) {
	return d.newRequester(bus.Caller{SessionKey: key, AgentID: ""})
}

// firstWord splits s into its first word and the rest, trimmed.
func firstWord(s string) (string, string) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}
