package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/deliveries"
)

// goalCommand is a `/goal` message: show, clear, or set to text.
type goalCommand struct {
	action string // "show" | "clear" | "set"
	text   string // the objective of "set", untrimmed
}

// The /goal action words OpenClaw has and sessionbus does not: its goals
// also pause, resume, complete and block, which need the runs to pursue
// them. Refused, so "/goal pause" never becomes the objective "pause".
var goalUnsupported = map[string]bool{
	"pause": true, "resume": true, "complete": true, "done": true, "block": true, "blocked": true,
}

// parseGoalCommand reads a message whose whole text is a /goal command
// (OpenClaw's words): `/goal` or `/goal status` shows the goal, `/goal
// clear` clears it, `/goal <text>` (or `start|set|create|edit <text>`)
// sets it. Anything else, "/goals" included, is an ordinary message.
func parseGoalCommand(text string) (goalCommand, bool) {
	t := strings.TrimSpace(text)
	rest, ok := strings.CutPrefix(t, "/goal")
	if r, _ := utf8.DecodeRuneInString(rest); !ok || (rest != "" && !unicode.IsSpace(r)) {
		return goalCommand{}, false
	}
	rest = strings.TrimSpace(rest)
	word, arg := rest, ""
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		word, arg = rest[:i], rest[i+1:]
	}
	switch w := strings.ToLower(word); {
	case rest == "" || (w == "status" && strings.TrimSpace(arg) == ""):
		return goalCommand{action: "show"}, true
	case w == "clear" && strings.TrimSpace(arg) == "":
		return goalCommand{action: "clear"}, true
	case w == "start" || w == "set" || w == "create" || w == "edit":
		return goalCommand{action: "set", text: arg}, true
	case goalUnsupported[w]:
		return goalCommand{action: w}, true
	}
	return goalCommand{action: "set", text: rest}, true
}

// inboundGoal answers a /goal message. It queues no run and leaves the
// session's route as it was: the answer goes straight back where the
// message came from, published to <prefix>.deliver.<channel> like a
// turn's reply (the adapter posts it from there), and is in the reply's
// `reply` field too. A refused command (an unknown session, a bad goal)
// writes nothing and is the error the ingress answers.
func (d *Deps) inboundGoal(ctx context.Context, ip inboundParams, cmd goalCommand) (*inboundResult, error) {
	opID := sessions.NewID()
	if ip.idempotencyKey != "" {
		opID = inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
	}
	var text string
	switch cmd.action {
	case "show":
		e, _, err := d.Store.Get(ctx, ip.sessionKey)
		if err != nil {
			return nil, d.goalSessionErr(ip.sessionKey, err)
		}
		text = goalText(goalUnchanged, e.Rares().Goal)
	case "set", "clear":
		ch := goalChange{key: ip.sessionKey, clear: cmd.action == "clear", actorID: ip.from, channel: ip.channel, opID: opID}
		if !ch.clear {
			var err error
			if ch.objective, err = checkObjective(cmd.text); err != nil {
				return nil, err
			}
		}
		res, err := d.changeGoal(ctx, ch)
		if err != nil {
			return nil, err
		}
		text = goalText(res.Status, res.Goal)
	default:
		return nil, badRequest(fmt.Sprintf("/goal %s is not supported: a goal here is set with /goal <text> and removed with /goal clear (/goal shows it)", cmd.action))
	}
	if err := d.deliverGoalAnswer(ctx, ip, opID, text); err != nil {
		d.Log.Warn("inbound: delivering the /goal answer failed", "session", ip.sessionKey, "err", err)
	}
	return &inboundResult{Status: "ok", RunID: opID, SessionKey: ip.sessionKey, Reply: text}, nil
}

func (d *Deps) goalSessionErr(key string, err error) error {
	if errors.Is(err, sessions.ErrNotFound) {
		return bus.Errorf(bus.CodeNotFound,
			"unknown session %s: a goal belongs to an existing session; check the key (sessions_list shows them)", key)
	}
	return fmt.Errorf("session %s: %w", key, err)
}

// deliverGoalAnswer publishes the answer to the route the message came
// from, masked as a turn's reply is; its message id (the command's id +
// ":reply") makes a retried message's second answer a no-op.
func (d *Deps) deliverGoalAnswer(ctx context.Context, ip inboundParams, opID, text string) error {
	if d.Deliveries == nil {
		return nil
	}
	text, _ = d.Redactor.ToolPayload(text)
	return d.Deliveries.Publish(ctx, deliveries.Delivery{
		Channel: ip.channel, To: ip.to, AccountID: ip.accountID, ThreadID: ip.threadID,
		Message: text, SessionKey: ip.sessionKey, RunID: opID,
	}, opID+":reply")
}
