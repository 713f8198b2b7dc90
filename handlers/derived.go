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
// The struct is sessions.Derived (the index keeps it by a typed pointer);
// the methods here read it. Its sizes: Names is a pointer where the two
// strings took 32 bytes, and KindAt one byte where the kind's string took
// 16, which with the byte fields brings it to the 16-byte allocation class
// (48 B a session, 48 MB at a million, against two strings and a kind).
type derivedFields sessions.Derived

// derivedNames is the part of derivedFields sessions share.
type derivedNames = sessions.DerivedNames

func (f *derivedFields) agentID() string { return f.Names.AgentID }
func (f *derivedFields) channel() string { return f.Names.Channel }

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
func (f *derivedFields) kind() string { return toolKinds[f.KindAt] }

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
	return func(e *sessions.Entry) *sessions.Derived { return (*sessions.Derived)(deriveFields(alias, e, names)) }
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
		Names:     names.get(derivedNames{AgentID: agentID, Channel: channel}),
		KindAt:    kindAt(kind),
		Malformed: k.Malformed(),
		CronRun:   k.IsCronRun(),
		Subagent:  k.IsSubagent(),
	}
	if p := e.Parent(); p != "" {
		f.ParentSameAgent = rules.AgentIDFromKey(p) == agentID
	}
	f.Plain = jsonPlainStrings(e.Key, e.SessionID, e.Label, e.Group, e.DisplayName, e.ParentSessionKey, e.SpawnedBy,
		e.Model, e.Status, agentID, kind, channel)
	return f
}

// derived is e's derivedFields: those the index computed, else computed
// now (an entry not from the index).
func (r *requester) derived(e *sessions.Entry) *derivedFields {
	if e.Derived != nil {
		return (*derivedFields)(e.Derived)
	}
	return deriveFields(r.alias, e, nil)
}
