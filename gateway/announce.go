package gateway

import (
	"context"
	"strings"

	"github.com/sessionbus/sessionbus/kv/sessions"
)

// AnnounceTarget is where an A2A announce is delivered (reference §4.5).
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

// agentOfKey is the <id> of `agent:<id>:...`, or "".
func agentOfKey(key string) string {
	parts := strings.SplitN(key, ":", 3)
	if len(parts) == 3 && strings.EqualFold(parts[0], "agent") {
		return parts[1]
	}
	return ""
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

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// ResolveAnnounceTarget applies reference §4.5 to a session key and its
// entry (nil when the session has none).
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
			Channel:   firstNonEmpty(dc.Channel, e.LastChannel, o.Provider),
			To:        firstNonEmpty(dc.To, e.LastTo),
			AccountID: firstNonEmpty(dc.AccountID, e.LastAccountID, o.AccountID),
			ThreadID:  firstNonEmpty(dc.ThreadID, e.LastThreadID, o.ThreadID, thread),
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
