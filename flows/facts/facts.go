// Package facts reads what the rules decide on from a stored session
// entry: the one place that knows both kv/sessions' Entry and
// rules.SessionFacts, so that rules stays free of storage and NATS and the
// tools and the gateway read an entry the same way.
package facts

import (
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// Of is the facts of entry e; nil (no entry) gives the zero facts.
func Of(e *sessions.Entry) rules.SessionFacts {
	if e == nil {
		return rules.SessionFacts{}
	}
	r := e.Rares()
	f := rules.SessionFacts{
		SpawnDepth: e.SpawnDepth, SubagentRole: r.SubagentRole, ChatType: e.ChatType,
		ModelOverride: r.ModelOverride, ProviderOverride: r.ProviderOverride,
		LastChannel: e.LastChannel, LastTo: e.LastTo,
	}
	if e.Origin != nil {
		f.OriginChatType = e.Origin.ChatType
	}
	if dc := e.DeliveryContext; dc != nil {
		f.DeliveryChannel, f.DeliveryTo = dc.Channel, dc.To
	}
	return f
}
