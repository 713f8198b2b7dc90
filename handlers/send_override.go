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
	"github.com/sessionbus/sessionbus/rules"
)

// sendOverrideResult is the answer of a send-policy change: the entry's
// override now ("allow", "deny", or "" for none) and the policy that
// decides deliveries of the session to its channel.
type sendOverrideResult struct {
	Status     string `json:"status"` // set | unchanged | ok (a /send that only shows)
	SessionKey string `json:"sessionKey"`
	SendPolicy string `json:"sendPolicy"`
	Effective  string `json:"effective"`
	Text       string `json:"text"`
}

// setSendOverride writes the entry's sendPolicy override (OpenClaw's
// field): "on" allow, "off" deny, "inherit" none. word "" only reads it.
func (d *Deps) setSendOverride(ctx context.Context, key, word string) (*sendOverrideResult, error) {
	var e *sessions.Entry
	var err error
	status := "ok"
	if word == "" {
		e, _, err = d.Store.Get(ctx, key)
		err = entryErr(key, err)
	} else {
		v, ok := rules.SendOverrideValue(word)
		if !ok {
			return nil, badRequest(fmt.Sprintf("send policy %q must be on, off or inherit", word))
		}
		e, status, err = d.setEntry(ctx, key, func(x *sessions.Entry) bool {
			if x.SendPolicy() == v {
				return false
			}
			x.SetRare(func(r *sessions.RareFields) { r.SendPolicy = v })
			return true
		})
	}
	if err != nil {
		return nil, err
	}
	eff := rules.ResolveSendPolicy(rules.ConfigSendPolicy(d.Config.Session.SendPolicy), e.SendPolicy(), key, sessionChannel(e), e.ChatType)
	return &sendOverrideResult{Status: status, SessionKey: key, SendPolicy: e.SendPolicy(), Effective: eff, Text: sendOverrideText(e.SendPolicy(), eff)}, nil
}

func sendOverrideText(override, effective string) string {
	word := map[string]string{rules.SendAllow: "on", rules.SendDeny: "off"}
	if override == "" {
		return fmt.Sprintf("Send policy: inherit (session.sendPolicy: %s).", word[effective])
	}
	return fmt.Sprintf("Send policy: %s (this session's override).", word[override])
}

// parseSendCommand reads a message whose whole text is `/send` or `/send
// on|off|inherit` (any other word is returned for the refusal); "/sender"
// or "/send it now please" are ordinary messages.
func parseSendCommand(text string) (word string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), "/send")
	if r, _ := utf8.DecodeRuneInString(rest); !ok || (rest != "" && !unicode.IsSpace(r)) {
		return "", false
	}
	fields := strings.Fields(rest)
	switch len(fields) {
	case 0:
		return "", true
	case 1:
		return fields[0], true
	}
	return "", false
}

// inboundSend answers /send like /goal: no run, the route as it was, the
// answer in the reply and published to the message's route (the answer to
// the command itself, so delivered even when the session's sends are off).
func (d *Deps) inboundSend(ctx context.Context, ip inboundParams, word string) (*inboundResult, error) {
	opID := sessions.NewID()
	if ip.idempotencyKey != "" {
		opID = inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
	}
	res, err := d.setSendOverride(ctx, ip.sessionKey, word)
	if err != nil {
		return nil, err
	}
	if err := d.deliverGoalAnswer(ctx, ip, opID, res.Text); err != nil {
		d.Log.Warn("inbound: delivering the /send answer failed", "session", ip.sessionKey, "err", err)
	}
	return &inboundResult{Status: "ok", RunID: opID, SessionKey: ip.sessionKey, Reply: res.Text}, nil
}

// checkTurnSendPolicy refuses a human turn into a session whose send
// policy (its sendPolicy override, else session.sendPolicy) denies, with
// OpenClaw's error: OpenClaw's dispatch does not run such a message, so no
// reply reaches the channel nor a waiting adapter. Commands are answered
// before this check, so `/send on` still lifts it. A session not created
// yet (a routed first message) is judged by its key and channel.
func (d *Deps) checkTurnSendPolicy(ctx context.Context, ip inboundParams) error {
	var override, chatType string
	e, _, err := d.Store.Get(ctx, ip.sessionKey)
	switch {
	case err == nil:
		override, chatType = e.SendPolicy(), e.ChatType
	case errors.Is(err, sessions.ErrNotFound):
		chatType = ip.chatType
	default:
		return fmt.Errorf("read the send policy of session %s: %w", ip.sessionKey, err)
	}
	if rules.ResolveSendPolicy(rules.ConfigSendPolicy(d.Config.Session.SendPolicy), override, ip.sessionKey, ip.channel, chatType) == rules.SendDeny {
		return bus.Errorf(bus.CodeForbidden, "%s", rules.SendBlockedError)
	}
	return nil
}
