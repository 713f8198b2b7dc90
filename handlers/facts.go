package handlers

import (
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// facts are what the tools need to know about a session key, parsed once
// when the index takes the entry in: listing 100 rows would otherwise parse
// each key several times per call.
type facts struct {
	agentID   string
	kind      string
	channel   string
	malformed bool
	cronRun   bool
	subagent  bool
	// plain: every string a sessions_list row takes from the entry or these
	// facts is written in JSON as it is, quoted (no byte to escape), so the
	// row is encoded with copies instead of a scan per byte (issue 17).
	plain bool
	// parentSameAgent: the parent key (e.Parent()) parses to agentID, so
	// Guard.Check(parent) is CheckAgent(parent, agentID) without parsing
	// the key on every listing of the row (a bool: in the padding, where a
	// string would take 16 bytes per session).
	parentSameAgent bool
}

// IndexDerive is the sessions.Derive hook workers index with (exported so the
// benchmarks measure the same per-session memory).
func IndexDerive(cfg *config.Config) sessions.Derive {
	alias := rules.ResolveAlias(cfg.Session.MainKey, cfg.Session.Scope)
	return func(e *sessions.Entry) any { return computeFacts(alias, e) }
}

func computeFacts(alias rules.Alias, e *sessions.Entry) *facts {
	kind := rules.Kind(e.Key, alias, e.ChatType)
	origin, last := "", e.LastChannel
	if e.Origin != nil {
		origin = e.Origin.Provider
	}
	if e.DeliveryContext != nil && e.DeliveryContext.Channel != "" {
		last = e.DeliveryContext.Channel
	}
	agentID := e.AgentID
	if agentID == "" {
		agentID = rules.AgentIDFromKey(e.Key)
	}
	f := &facts{
		agentID:   agentID,
		kind:      kind,
		channel:   rules.DeriveChannel(kind, e.Channel, origin, last, e.Key),
		malformed: rules.ClassifyKeyShape(e.Key) == rules.ShapeMalformedAgent,
		cronRun:   rules.IsCronRunKey(e.Key),
		subagent:  rules.IsSubagentKey(e.Key),
	}
	if p := e.Parent(); p != "" {
		f.parentSameAgent = rules.AgentIDFromKey(p) == agentID
	}
	f.plain = jsonPlainStrings(e.Key, e.SessionID, e.Label, e.Group, e.DisplayName, e.ParentSessionKey, e.SpawnedBy,
		e.Model, e.Status, f.agentID, f.kind, f.channel)
	return f
}

func (r *requester) facts(e *sessions.Entry) *facts {
	if f, ok := e.Derived.(*facts); ok {
		return f
	}
	return computeFacts(r.alias, e)
}
