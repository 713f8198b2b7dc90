package rules

// Session scopes (session.scope).
const (
	ScopePerSender = "per-sender"
	ScopeGlobal    = "global"
)

// Reserved keys.
const (
	KeyMain    = "main"    // display form of the main session, and the input alias for it
	KeyGlobal  = "global"  // the shared session when session.scope is "global"
	KeyUnknown = "unknown" // bucket for unroutable traffic; never listed
	KeyCurrent = "current" // input alias for the caller's own session
)

// Alias is the requester-independent main-session configuration every tool
// needs to translate between the keys agents type and the keys the store
// holds. The zero value behaves like ResolveAlias("", "").
type Alias struct {
	MainKey string // normalized session.mainKey
	Alias   string // what input "main" stands for: "global" under global scope, else MainKey
	Scope   string // session.scope
}

// ResolveAlias builds the Alias from session.mainKey and session.scope.
// Scope is trimmed and lower-cased (upstream only accepts the exact enum via
// its schema; being lenient here cannot widen access, since only "global"
// changes anything).
func ResolveAlias(mainKey, scope string) Alias {
	mk := lowerTrim(mainKey)
	if mk == "" {
		mk = DefaultMainKey
	}
	sc := lowerTrim(scope)
	if sc == "" {
		sc = ScopePerSender
	}
	alias := mk
	if sc == ScopeGlobal {
		alias = KeyGlobal
	}
	return Alias{MainKey: mk, Alias: alias, Scope: sc}
}

func (a Alias) norm() Alias {
	if a.MainKey == "" && a.Alias == "" && a.Scope == "" {
		return ResolveAlias("", "")
	}
	if a.MainKey == "" {
		a.MainKey = DefaultMainKey
	}
	if a.Alias == "" {
		a.Alias = a.MainKey
	}
	return a
}

// Display is the key shown to the model: the alias and the bare main key
// both read as "main". Agent-scoped keys are shown as they are.
func (a Alias) Display(key string) string {
	a = a.norm()
	if key == a.Alias || key == a.MainKey {
		return KeyMain
	}
	return key
}

// Internal maps a key the model typed to the key the store uses: "current"
// becomes the requester's key (kept literally when the requester is unknown,
// so resolution fails visibly instead of silently targeting something) and
// "main" becomes the alias. Comparisons are exact, as upstream's are.
func (a Alias) Internal(key, requesterKey string) string {
	a = a.norm()
	switch key {
	case KeyCurrent:
		if trim(requesterKey) != "" {
			return requesterKey
		}
		return key
	case KeyMain:
		return a.Alias
	}
	return key
}

// StoreKey maps an internal key (see Internal) to the key the store holds
// the session under. The alias stands for the main session of an agent,
// agent:<agentID>:<mainKey>, unless it is the shared "global" session of
// global scope, which is stored as "global". Every other key is its own
// store key. agentID is the agent whose main session the alias means: the
// caller's when a caller typed "main", AgentIDFromKey(key) when the key is
// all there is. Handlers and the gateway both resolve keys through it, so a
// session addressed by its alias and by its full key is one session.
func (a Alias) StoreKey(internal, agentID string) string {
	a = a.norm()
	if internal == a.Alias && a.Alias != KeyGlobal {
		return a.MainSessionKey(agentID)
	}
	return internal
}

// MainSessionKey is the canonical main session of an agent,
// agent:<id>:<mainKey>.
func (a Alias) MainSessionKey(agentID string) string {
	return "agent:" + NormalizeAgentID(agentID) + ":" + a.norm().MainKey
}
