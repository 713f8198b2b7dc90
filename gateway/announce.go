package gateway

import (
	"context"
	"strings"

	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// AnnounceTarget is where an A2A announce is delivered: the channel, the
// recipient on it, and optionally the account and thread.
type AnnounceTarget struct {
	Channel   string `json:"channel"`
	To        string `json:"to"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
}

// preferSessionLookup lists channels whose plugin sets
// preferSessionLookupForAnnounceTarget.
var preferSessionLookup = map[string]bool{"whatsapp": true, "slack": true}

// stripAgentPrefix removes a leading `agent:<id>:`.
func stripAgentPrefix(key string) string {
	parts := strings.SplitN(key, ":", 3)
	if len(parts) == 3 && strings.EqualFold(parts[0], "agent") {
		return parts[2]
	}
	return key
}

// targetFromKey parses `<channel>:<group|channel>:<id>[:thread:<tid>]`.
func targetFromKey(key string) (t *AnnounceTarget, threadSuffix string) {
	rest := stripAgentPrefix(key)
	if i := strings.Index(rest, ":thread:"); i >= 0 {
		threadSuffix = rest[i+len(":thread:"):]
		rest = rest[:i]
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return nil, threadSuffix
	}
	kind := strings.ToLower(parts[1])
	if kind != "group" && kind != "channel" {
		return nil, threadSuffix
	}
	return &AnnounceTarget{Channel: strings.ToLower(parts[0]), To: kind + ":" + parts[2], ThreadID: threadSuffix}, threadSuffix
}

// ResolveAnnounceTarget finds where a session's announce goes, from its key
// and its entry (nil when the session has none): a group or channel key
// names its target itself, unless its channel prefers the session's recorded
// route (WhatsApp, Slack); otherwise the entry's delivery context, then its
// last route, then its origin decide, and the key's target is the fallback.
func ResolveAnnounceTarget(key string, e *sessions.Entry) *AnnounceTarget {
	fromKey, thread := targetFromKey(key)
	if fromKey != nil && !preferSessionLookup[fromKey.Channel] {
		return fromKey
	}
	if e != nil {
		var dc sessions.DeliveryContext
		if e.DeliveryContext != nil {
			dc = *e.DeliveryContext
		}
		var o sessions.Origin
		if e.Origin != nil {
			o = *e.Origin
		}
		t := &AnnounceTarget{
			Channel:   rules.FirstNonEmpty(dc.Channel, e.LastChannel, o.Provider),
			To:        rules.FirstNonEmpty(dc.To, e.LastTo),
			AccountID: rules.FirstNonEmpty(dc.AccountID, e.LastAccountID, o.AccountID),
			ThreadID:  rules.FirstNonEmpty(dc.ThreadID, e.LastThreadID(), o.ThreadID, thread),
		}
		if t.Channel != "" && t.To != "" {
			return t
		}
	}
	return fromKey
}

func (g *Gateway) resolveAnnounceTarget(ctx context.Context, key string) *AnnounceTarget {
	e, _, err := g.store.Get(ctx, key)
	if err != nil {
		e = nil
	}
	return ResolveAnnounceTarget(key, e)
}
