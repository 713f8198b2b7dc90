package rules

import (
	"strings"

	"github.com/sessionbus/sessionbus/config"
)

// Send-policy decisions.
const (
	SendAllow = "allow"
	SendDeny  = "deny"
)

// SendBlockedError is the error every send path reports when the policy
// denies; agents and tests match on it.
const SendBlockedError = "send blocked by session policy"

// SendPolicy is session.sendPolicy.
type SendPolicy struct {
	Default string     `json:"default,omitempty"` // "allow" (also when invalid or missing) or "deny"
	Rules   []SendRule `json:"rules,omitempty"`
}

// SendRule applies Action to sessions that satisfy every set field of Match.
type SendRule struct {
	Action string    `json:"action,omitempty"` // "allow" (also when invalid) or "deny"
	Match  SendMatch `json:"match,omitempty"`
}

// SendMatch fields are compared lower-cased; empty fields match anything.
type SendMatch struct {
	Channel      string `json:"channel,omitempty"`
	ChatType     string `json:"chatType,omitempty"`     // direct|group|channel; legacy "dm" = direct
	KeyPrefix    string `json:"keyPrefix,omitempty"`    // tested on the key with and without "agent:<id>:"
	RawKeyPrefix string `json:"rawKeyPrefix,omitempty"` // tested on the full key only
}

// NormalizeSendPolicy reads an "allow"/"deny" value case-insensitively; any
// other value is "" (no decision), which is how an entry's sendPolicy
// override is unset.
func NormalizeSendPolicy(v string) string {
	switch lowerTrim(v) {
	case SendAllow:
		return SendAllow
	case SendDeny:
		return SendDeny
	}
	return ""
}

// ResolveSendPolicy decides whether a message may be delivered into a
// session. entryOverride is the entry's sendPolicy, which wins over config.
// channel must already be the first non-empty of the caller's channel, the
// entry's channel and its lastChannel; chatType is the caller's or the
// entry's. Both fall back to what the key implies.
//
// Rules are evaluated in order and the first matching deny wins at once, so
// a broad allow cannot mask a narrower deny listed after it. A rule whose
// chatType is set but not a known chat type never matches.
func ResolveSendPolicy(p *SendPolicy, entryOverride, sessionKey, channel, chatType string) string {
	if o := NormalizeSendPolicy(entryOverride); o != "" {
		return o
	}
	if p == nil {
		return SendAllow
	}
	ch := lowerTrim(channel)
	if ch == "" {
		ch = channelFromKey(sessionKey)
	}
	ct := normalizeChatType(chatType)
	if ct == "" {
		ct = normalizeChatType(ChatTypeFromKey(sessionKey))
	}
	raw := strings.ToLower(sessionKey)
	stripped := restOrRaw(sessionKey)

	allowed := false
	for _, r := range p.Rules {
		m := r.Match
		if want := lowerTrim(m.Channel); want != "" && want != ch {
			continue
		}
		if want := lowerTrim(m.ChatType); want != "" && (normalizeChatType(want) == "" || normalizeChatType(want) != ct) {
			continue
		}
		if want := lowerTrim(m.RawKeyPrefix); want != "" && !strings.HasPrefix(raw, want) {
			continue
		}
		if want := lowerTrim(m.KeyPrefix); want != "" && !strings.HasPrefix(raw, want) && !strings.HasPrefix(stripped, want) {
			continue
		}
		if NormalizeSendPolicy(r.Action) == SendDeny {
			return SendDeny
		}
		allowed = true
	}
	if allowed {
		return SendAllow
	}
	if NormalizeSendPolicy(p.Default) == SendDeny {
		return SendDeny
	}
	return SendAllow
}

// ConfigSendPolicy is session.sendPolicy as ResolveSendPolicy reads it
// (nil when unset): the tools and the gateway's deliveries decide alike.
func ConfigSendPolicy(p *config.SendPolicy) *SendPolicy {
	if p == nil {
		return nil
	}
	out := &SendPolicy{Default: p.Default}
	for _, r := range p.Rules {
		out.Rules = append(out.Rules, SendRule{Action: r.Action, Match: SendMatch{
			Channel: r.Match.Channel, ChatType: r.Match.ChatType, KeyPrefix: r.Match.KeyPrefix, RawKeyPrefix: r.Match.RawKeyPrefix,
		}})
	}
	return out
}

// Send-policy override words (`/send`, `sessionbus session send-policy`),
// OpenClaw's: on stores "allow", off "deny", inherit removes the
// override so session.sendPolicy decides.
const (
	SendOverrideOn      = "on"
	SendOverrideOff     = "off"
	SendOverrideInherit = "inherit"
)

// SendOverrideValue maps an override word to the entry's sendPolicy
// value; ok is false for any other word.
func SendOverrideValue(word string) (value string, ok bool) {
	switch lowerTrim(word) {
	case SendOverrideOn, SendAllow:
		return SendAllow, true
	case SendOverrideOff, SendDeny:
		return SendDeny, true
	case SendOverrideInherit:
		return "", true
	}
	return "", false
}
