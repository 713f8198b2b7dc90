package handlers

import (
	"sync"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// derivedFields are what the tools compute from a session entry: its key
// parsed (agent, kind, shape), its channel resolved, and whether its
// strings need escaping in JSON. The index's Derive hook computes them
// once, when it takes the entry in, and keeps them in Entry.Derived:
// listing 100 rows would otherwise parse each key several times per call.
type derivedFields struct {
	// names are the agent id and the channel, shared by every session
	// with the same pair (a handful per deployment): a pointer where the
	// two strings took 32 bytes, which with the byte fields below brings
	// the struct from the 48-byte allocation class to the 16-byte one
	// (32 bytes a session, 32 MB at a million).
	names *derivedNames
	// kindAt is the kind (rules.ToolKind's value) as its place in
	// toolKinds: one byte where a string takes 16, which brings the
	// struct from the 64-byte allocation class to the 48-byte one (16
	// bytes a session, 16 MB at a million).
	kindAt    uint8
	malformed bool
	cronRun   bool
	subagent  bool
	// plain: every string a sessions_list row takes from the entry or these
	// fields is written in JSON as it is, quoted (no byte to escape), so
	// the row is encoded with copies instead of a scan per byte.
	plain bool
	// parentSameAgent: the parent key (e.Parent()) parses to agentID, so
	// Guard.Check(parent) is CheckAgent(parent, agentID) without parsing
	// the key on every listing of the row (a bool: in the padding, where a
	// string would take 16 bytes per session).
	parentSameAgent bool
}

// derivedNames is the part of derivedFields sessions share.
type derivedNames struct{ agentID, channel string }

func (f *derivedFields) agentID() string { return f.names.agentID }
func (f *derivedFields) channel() string { return f.names.channel }

// namesTable interns derivedNames for one index. Bounded: past its limit
// a pair is kept unshared, as it would be without the table.
type namesTable struct {
	mu sync.Mutex
	m  map[derivedNames]*derivedNames
}

const namesTableMax = 4096

// get is the shared copy of n (nil t: a copy of n's own).
func (t *namesTable) get(n derivedNames) *derivedNames {
	if t == nil {
		return &n
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[n]; ok {
		return v
	}
	v := &n
	if len(t.m) < namesTableMax {
		t.m[n] = v
	}
	return v
}

// toolKinds are the values rules.ToolKind returns.
var toolKinds = [...]string{rules.KindOther, rules.KindMain, rules.KindGroup, rules.KindCron, rules.KindHook, rules.KindNode}

// kind is the row's kind.
func (f *derivedFields) kind() string { return toolKinds[f.kindAt] }

// kindAt is kind's place in toolKinds; rules.ToolKind returns no other.
func kindAt(kind string) uint8 {
	for i, k := range toolKinds {
		if k == kind {
			return uint8(i)
		}
	}
	return 0
}

// IndexDerive is the sessions.Derive hook workers index with (exported so the
// benchmarks measure the same per-session memory).
func IndexDerive(cfg *config.Config) sessions.Derive {
	alias := rules.ResolveAlias(cfg.Session.MainKey, cfg.Session.Scope)
	names := &namesTable{m: map[derivedNames]*derivedNames{}}
	return func(e *sessions.Entry) any { return deriveFields(alias, e, names) }
}

// deriveFields computes e's derivedFields, sharing their names through
// names (nil: not shared).
func deriveFields(alias rules.Alias, e *sessions.Entry, names *namesTable) *derivedFields {
	kind := rules.Kind(e.Key, alias, e.ChatType)
	origin, last := "", e.LastChannel
	if e.Origin != nil {
		origin = e.Origin.Provider
	}
	if e.DeliveryContext != nil && e.DeliveryContext.Channel != "" {
		last = e.DeliveryContext.Channel
	}
	k := rules.ParseKey(e.Key)
	agentID := e.AgentID
	if agentID == "" {
		agentID = k.AgentID
	}
	channel := rules.DeriveChannel(kind, e.Channel, origin, last, e.Key)
	f := &derivedFields{
		names:     names.get(derivedNames{agentID: agentID, channel: channel}),
		kindAt:    kindAt(kind),
		malformed: k.Malformed(),
		cronRun:   k.IsCronRun(),
		subagent:  k.IsSubagent(),
	}
	if p := e.Parent(); p != "" {
		f.parentSameAgent = rules.AgentIDFromKey(p) == agentID
	}
	f.plain = jsonPlainStrings(e.Key, e.SessionID, e.Label, e.Group, e.DisplayName, e.ParentSessionKey, e.SpawnedBy,
		e.Model, e.Status, agentID, kind, channel)
	return f
}

// derived is e's derivedFields: those the index computed, else computed
// now (an entry not from the index).
func (r *requester) derived(e *sessions.Entry) *derivedFields {
	if f, ok := e.Derived.(*derivedFields); ok {
		return f
	}
	return deriveFields(r.alias, e, nil)
}
