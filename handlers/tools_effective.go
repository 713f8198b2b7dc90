package handlers

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/flows/facts"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// toolsResult is a session's effective tool list: every tool this build
// serves, allowed or not, with the stage and key that removed each missing
// one; Text is the same as a human reads it.
type toolsResult struct {
	Status     string              `json:"status"`
	SessionKey string              `json:"sessionKey"`
	Tools      []rules.ToolVerdict `json:"tools"`
	Text       string              `json:"text"`
}

// effectiveTools is the tool list of session key as the worker would
// check its calls: the same pipeline, read from the same entry. sender is
// the sender a group's toolsBySender is matched against ("" unknown).
func (d *Deps) effectiveTools(ctx context.Context, key, sender string) (*toolsResult, error) {
	e, _, err := d.Store.Get(ctx, key)
	if err != nil {
		return nil, entryErr(key, err)
	}
	c := rules.SessionToolContext(d.Config, key, facts.Of(e), false, sender)
	vs := rules.EffectiveTools(d.Config, c, schema.Names())
	return &toolsResult{Status: "ok", SessionKey: key, Tools: vs, Text: rules.FormatToolList(key, vs)}, nil
}

// isToolsCommand reports whether a message's whole text is `/tools`
// (OpenClaw's command word), with nothing after it: "/toolsy" or "/tools
// please" are ordinary messages.
func isToolsCommand(text string) bool {
	t := strings.TrimSpace(text)
	rest, ok := strings.CutPrefix(t, "/tools")
	if !ok {
		return false
	}
	if r, _ := utf8.DecodeRuneInString(rest); rest != "" && !unicode.IsSpace(r) {
		return false
	}
	return strings.TrimSpace(rest) == ""
}

// inboundTools answers a /tools message like /goal's answer: no run, the
// route left as it was, the list published to <prefix>.deliver.<channel>
// for the route the message came from and in the reply's `reply` field.
// The sender is the message's, so a group's toolsBySender entry for them
// applies.
func (d *Deps) inboundTools(ctx context.Context, ip inboundParams) (*inboundResult, error) {
	opID := sessions.NewID()
	if ip.idempotencyKey != "" {
		opID = inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
	}
	res, err := d.effectiveTools(ctx, ip.sessionKey, ip.from)
	if err != nil {
		return nil, err
	}
	if err := d.deliverGoalAnswer(ctx, ip, opID, res.Text); err != nil {
		d.Log.Warn("inbound: delivering the /tools answer failed", "session", ip.sessionKey, "err", err)
	}
	return &inboundResult{Status: "ok", RunID: opID, SessionKey: ip.sessionKey, Reply: res.Text}, nil
}
