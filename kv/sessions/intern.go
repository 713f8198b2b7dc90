package sessions

import "strings"

// interner makes the index's entries share one copy of the values most
// sessions repeat (agent ids, channels, models, chat types, origins), which
// each JSON decode would otherwise allocate again: part of keeping the index
// near 1 KiB per session. Interned values are shared between entries, which
// the index hands out read-only anyway. Bounded: past its limits a value is
// kept as decoded.
type interner struct {
	strs    map[string]string
	origins map[Origin]*Origin
}

const (
	internMaxStrings = 4096
	internMaxLen     = 64
	internMaxOrigins = 1024
)

// entry interns e's low-cardinality fields in place.
func (in *interner) entry(e *Entry) {
	for _, p := range [...]*string{
		&e.AgentID, &e.Channel, &e.LastChannel, &e.LastAccountID, &e.ChatType,
		&e.Model, &e.ModelProvider, &e.Status, &e.Group,
	} {
		*p = in.str(*p)
	}
	if r := e.Rare; r != nil { // e's own: just decoded
		for _, p := range [...]*string{&r.SendPolicy, &r.SubagentRole, &r.SubagentControlScope, &r.ProviderOverride, &r.ModelOverride, &r.ThinkingLevel} {
			*p = in.str(*p)
		}
	}
	if dc := e.DeliveryContext; dc != nil {
		dc.Channel, dc.AccountID = in.str(dc.Channel), in.str(dc.AccountID)
	}
	if o := e.Origin; o != nil {
		o.Provider, o.AccountID, o.ChatType = in.str(o.Provider), in.str(o.AccountID), in.str(o.ChatType)
		if o.ThreadID == "" { // a thread id is per conversation: nothing to share
			e.Origin = in.origin(o)
		}
	}
}

func (in *interner) str(s string) string {
	if s == "" || len(s) > internMaxLen {
		return s
	}
	if v, ok := in.strs[s]; ok {
		return v
	}
	if len(in.strs) < internMaxStrings {
		if in.strs == nil {
			in.strs = make(map[string]string)
		}
		in.strs[s] = s
	}
	return s
}

func (in *interner) origin(o *Origin) *Origin {
	if v, ok := in.origins[*o]; ok {
		return v
	}
	if len(in.origins) < internMaxOrigins {
		if in.origins == nil {
			in.origins = make(map[Origin]*Origin)
		}
		in.origins[*o] = o
	}
	return o
}

// pack moves e's own strings (key, ids, names: the ones no other session
// shares) into one allocation instead of one each, reusing old's (the
// version of e it replaces, or nil) where they are unchanged, so an update
// that leaves them alone allocates none and retains nothing more.
func pack(e, old *Entry) {
	var fields, prev [ownFields]*string
	ownStrings(e, &fields)
	if old != nil {
		ownStrings(old, &prev)
	}
	var fresh [ownFields]bool
	n := 0
	for i, p := range fields {
		switch {
		case p == nil || *p == "":
		case prev[i] != nil && *prev[i] == *p:
			*p = *prev[i]
		default:
			fresh[i] = true
			n += len(*p)
		}
	}
	if n == 0 {
		return
	}
	var b strings.Builder
	b.Grow(n)
	for i, p := range fields {
		if fresh[i] {
			b.WriteString(*p)
		}
	}
	all, at := b.String(), 0
	for i, p := range fields {
		if fresh[i] {
			*p = all[at : at+len(*p)]
			at += len(*p)
		}
	}
}

const ownFields = 10

// ownStrings lists the fields pack packs, always in the same order; nil
// for the delivery context's when there is none.
func ownStrings(e *Entry, out *[ownFields]*string) {
	*out = [ownFields]*string{&e.Key, &e.SessionID, &e.DisplayName, &e.Label, &e.Subject, &e.LastTo,
		&e.SpawnedBy, &e.ParentSessionKey}
	if dc := e.DeliveryContext; dc != nil {
		out[8], out[9] = &dc.To, &dc.ThreadID
	}
}
