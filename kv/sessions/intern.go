package sessions

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
		&e.AgentID, &e.Channel, &e.LastChannel, &e.LastAccountID, &e.ChatType, &e.SubagentRole,
		&e.SubagentControlScope, &e.SendPolicy, &e.Model, &e.ModelProvider, &e.ProviderOverride,
		&e.ModelOverride, &e.ThinkingLevel, &e.Status, &e.Group,
	} {
		*p = in.str(*p)
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
