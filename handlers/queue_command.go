package handlers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// `/queue [mode] [debounce:D] [cap:N] [drop:P]` (OpenClaw's /queue): sets
// the session's queue override, `/queue default` or `/queue reset` clears
// it, a bare `/queue` shows the session's settings. The op
// <prefix>.ops.session.queue and `sessionbus session queue` set the same.
// A word that is no mode, or an option that does not parse, is answered
// OpenClaw's text and nothing is written.

var queueCommandRe = regexp.MustCompile(`(?is)^/queue(?:\s+(.*))?$`)

// parseQueueCommand reads a message whose text is /queue and its words.
func parseQueueCommand(text string) (args []string, ok bool) {
	m := queueCommandRe.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return nil, false
	}
	return strings.Fields(m[1]), true
}

// QueueChange is a change to a session's queue: a mode (or "default" /
// "reset"), and options in /queue's words ("" where not given).
type QueueChange struct {
	Mode, Debounce, Cap, Drop string
}

// queueChangeOf reads /queue's words: the first plain word is the mode,
// key:value (or key=value) words are options.
func queueChangeOf(args []string) QueueChange {
	var c QueueChange
	seenMode := false
	for _, a := range args {
		k, v, opt := strings.Cut(a, ":")
		if !opt {
			k, v, opt = strings.Cut(a, "=")
		}
		switch strings.ToLower(k) {
		case "debounce", "debouncems":
			if opt {
				c.Debounce = v
				continue
			}
		case "cap":
			if opt {
				c.Cap = v
				continue
			}
		case "drop":
			if opt {
				c.Drop = v
				continue
			}
		}
		if !seenMode {
			c.Mode, seenMode = a, true
		}
	}
	return c
}

// QueueResult is the answer of a queue change (or of a bare /queue).
type QueueResult struct {
	SessionKey string `json:"sessionKey"`
	// Mode, DebounceMs, Cap and Drop are the session's queue after it
	Mode       string `json:"mode"`
	DebounceMs int64  `json:"debounceMs"`
	Cap        int    `json:"cap"`
	Drop       string `json:"drop"`
	Text       string `json:"text"` // OpenClaw's answer
}

// errQueueInput is a change OpenClaw refuses: its text is the answer.
type errQueueInput struct{ text string }

func (e errQueueInput) Error() string { return e.text }

// SetQueue applies c to session key's queue override (channel: the
// channel its settings are shown for). A change that does not parse is an
// errQueueInput with OpenClaw's words, and writes nothing.
func (d *Deps) SetQueue(ctx context.Context, key, channel string, c QueueChange) (*QueueResult, error) {
	e, _, err := d.Store.Get(ctx, key)
	if err = entryErr(key, err); err != nil {
		return nil, err
	}
	channel = rules.FirstNonEmpty(channel, sessionChannel(e))
	if c == (QueueChange{}) {
		s := d.queueOf(e, channel)
		return queueResult(key, s, config.QueueStatusText(s)), nil
	}
	var errs, acks []string
	mode, reset := "", false
	if c.Mode != "" {
		switch strings.ToLower(c.Mode) {
		case "default", "reset", "clear":
			reset = true
		default:
			m, ok := config.NormalizeQueueMode(c.Mode)
			if !ok {
				errs = append(errs, config.UnknownQueueModeText(c.Mode))
			}
			mode = m
		}
	}
	var debounce *int64
	if c.Debounce != "" {
		if ms, ok := config.ParseQueueDebounce(c.Debounce); ok {
			debounce = &ms
		} else {
			errs = append(errs, config.InvalidDebounceText(c.Debounce))
		}
	}
	var capN int64
	if c.Cap != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(c.Cap), 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, config.InvalidCapText(c.Cap))
		}
		capN = n
	}
	drop := ""
	if c.Drop != "" {
		dp, ok := config.NormalizeQueueDrop(c.Drop)
		if !ok {
			errs = append(errs, config.InvalidDropText(c.Drop))
		}
		drop = dp
	}
	if len(errs) > 0 {
		return nil, errQueueInput{strings.Join(errs, " ")}
	}
	switch {
	case mode != "":
		acks = append(acks, config.QueueModeSetText(mode))
	case reset:
		acks = append(acks, config.QueueResetText)
	}
	if debounce != nil {
		acks = append(acks, config.QueueDebounceSetText(*debounce))
	}
	if capN > 0 {
		acks = append(acks, config.QueueCapSetText(capN))
	}
	if drop != "" {
		acks = append(acks, config.QueueDropSetText(drop))
	}
	e, _, err = d.Store.Update(ctx, key, func(e *sessions.Entry) error {
		before := e.Rares()
		e.SetRare(func(r *sessions.RareFields) {
			if reset {
				r.QueueMode, r.QueueDebounceMs, r.QueueCap, r.QueueDrop = "", nil, 0, ""
			}
			if mode != "" {
				r.QueueMode = mode
			}
			if debounce != nil {
				r.QueueDebounceMs = debounce
			}
			if capN > 0 {
				r.QueueCap = capN
			}
			if drop != "" {
				r.QueueDrop = drop
			}
		})
		after := e.Rares()
		if after.QueueMode == before.QueueMode && after.QueueCap == before.QueueCap && after.QueueDrop == before.QueueDrop &&
			sameMs(after.QueueDebounceMs, before.QueueDebounceMs) {
			return record.ErrUnchanged
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("set the queue of session %s: %w", key, err)
	}
	return queueResult(key, d.queueOf(e, channel), strings.Join(acks, " ")), nil
}

func sameMs(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func queueResult(key string, s config.QueueSettings, text string) *QueueResult {
	return &QueueResult{SessionKey: key, Mode: s.Mode, DebounceMs: s.DebounceMs, Cap: s.Cap, Drop: s.Drop, Text: text}
}

// inboundQueue answers /queue like /goal: no run, the answer in the reply
// and published to the message's route.
func (d *Deps) inboundQueue(ctx context.Context, breq *bus.Request, ip inboundParams, args []string) (*inboundResult, error) {
	if _, err := d.reachable(ctx, breq.Caller, ip.sessionKey); err != nil {
		return nil, err
	}
	opID := sessions.NewID()
	if ip.idempotencyKey != "" {
		opID = inboundRunID(ip.channel, ip.sessionKey, ip.idempotencyKey)
	}
	text := ""
	res, err := d.SetQueue(ctx, ip.sessionKey, ip.channel, queueChangeOf(args))
	var bad errQueueInput
	switch {
	case errors.As(err, &bad):
		text = bad.text
	case err != nil:
		return nil, err
	default:
		text = res.Text
	}
	if err := d.deliverGoalAnswer(ctx, ip, opID, text); err != nil {
		d.Log.Warn("inbound: delivering the /queue answer failed", "session", ip.sessionKey, "err", err)
	}
	return &inboundResult{Status: "ok", RunID: opID, SessionKey: ip.sessionKey, Reply: text}, nil
}

// queueOp is <prefix>.ops.session.queue: {"sessionKey", "mode"} with the
// optional "debounce", "cap" and "drop" in /queue's words; a bad one is a
// bad request with OpenClaw's text.
func (d *Deps) queueOp(ctx context.Context, key string, p rules.Params) (any, error) {
	var c QueueChange
	for _, f := range []struct {
		name string
		v    *string
	}{{"mode", &c.Mode}, {"debounce", &c.Debounce}, {"drop", &c.Drop}} {
		var err error
		if *f.v, _, err = p.String(f.name); err != nil {
			return nil, bus.Thrown(err)
		}
	}
	if n, has, err := p.NonNegativeInt("cap"); err != nil {
		return nil, bus.Thrown(err)
	} else if has {
		c.Cap = strconv.Itoa(n)
	}
	res, err := d.SetQueue(ctx, key, "", c)
	var bad errQueueInput
	if errors.As(err, &bad) {
		return nil, bus.Thrown(badRequest(bad.text))
	}
	return res, bus.Thrown(err)
}
