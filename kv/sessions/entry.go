package sessions

// Origin is where a session was created.
type Origin struct {
	Provider  string `json:"provider,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
	ChatType  string `json:"chatType,omitempty"`
}

// DeliveryContext is the persisted delivery route of a session.
type DeliveryContext struct {
	Channel   string `json:"channel,omitempty"`
	To        string `json:"to,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
}

// Entry is one session in the store, with OpenClaw's session-store fields and
// the sessions_list row fields under OpenClaw's names, so an OpenClaw store entry
// imports as it is.
type Entry struct {
	Key                  string           `json:"key"`
	AgentID              string           `json:"agentId,omitempty"`
	SessionID            string           `json:"sessionId,omitempty"`
	CreatedAt            int64            `json:"createdAt,omitempty"`
	UpdatedAt            int64            `json:"updatedAt,omitempty"`
	Label                string           `json:"label,omitempty"`
	DisplayName          string           `json:"displayName,omitempty"`
	Subject              string           `json:"subject,omitempty"`
	Group                string           `json:"group,omitempty"`
	DerivedTitle         string           `json:"derivedTitle,omitempty"`
	Channel              string           `json:"channel,omitempty"`
	LastChannel          string           `json:"lastChannel,omitempty"`
	LastTo               string           `json:"lastTo,omitempty"`
	LastAccountID        string           `json:"lastAccountId,omitempty"`
	LastThreadID         string           `json:"lastThreadId,omitempty"`
	Origin               *Origin          `json:"origin,omitempty"`
	DeliveryContext      *DeliveryContext `json:"deliveryContext,omitempty"`
	ChatType             string           `json:"chatType,omitempty"`
	SpawnedBy            string           `json:"spawnedBy,omitempty"`
	ParentSessionKey     string           `json:"parentSessionKey,omitempty"`
	SpawnDepth           *int             `json:"spawnDepth,omitempty"`
	SubagentRole         string           `json:"subagentRole,omitempty"`
	SubagentControlScope string           `json:"subagentControlScope,omitempty"`
	SpawnedWorkspaceDir  string           `json:"spawnedWorkspaceDir,omitempty"`
	SendPolicy           string           `json:"sendPolicy,omitempty"`
	Model                string           `json:"model,omitempty"`
	ModelProvider        string           `json:"modelProvider,omitempty"`
	ProviderOverride     string           `json:"providerOverride,omitempty"`
	ModelOverride        string           `json:"modelOverride,omitempty"`
	ThinkingLevel        string           `json:"thinkingLevel,omitempty"`
	InputTokens          int64            `json:"inputTokens,omitempty"`
	OutputTokens         int64            `json:"outputTokens,omitempty"`
	TotalTokens          int64            `json:"totalTokens,omitempty"`
	ContextTokens        int64            `json:"contextTokens,omitempty"`
	CacheRead            int64            `json:"cacheRead,omitempty"`
	CacheWrite           int64            `json:"cacheWrite,omitempty"`
	CompactionCount      int64            `json:"compactionCount,omitempty"`
	Status               string           `json:"status,omitempty"`
	StartedAt            int64            `json:"startedAt,omitempty"`
	EndedAt              int64            `json:"endedAt,omitempty"`
	RuntimeMs            int64            `json:"runtimeMs,omitempty"`
	AbortedLastRun       bool             `json:"abortedLastRun,omitempty"`
	Archived             bool             `json:"archived,omitempty"`
	Pinned               bool             `json:"pinned,omitempty"`
	Goal                 string           `json:"goal,omitempty"`
	OwnerID              string           `json:"ownerId,omitempty"`
	CreatorID            string           `json:"creatorId,omitempty"`
	ProjectID            string           `json:"projectId,omitempty"`
	WorkspaceDir         string           `json:"workspaceDir,omitempty"`
	StateVersion         uint64           `json:"stateVersion,omitempty"`
	// Imports are the transcript files `sessionbus import` loaded into
	// this session (the newest MaxImports), so a repeated or interrupted
	// import never appends a file twice. sessionbus's own field.
	Imports []ImportMark `json:"sessionbusImports,omitempty"`

	// Derived is what the index's Derive hook computed from this entry
	// when it was indexed (parsed key facts); never stored.
	Derived any `json:"-"`
}

// MaxImports bounds Entry.Imports: the oldest marks are dropped first.
const MaxImports = 32

// ImportMark is one transcript file imported into a session.
type ImportMark struct {
	ID   string `json:"id"` // hash of the file's entries
	At   uint64 `json:"at"` // transcript position of its first entry
	N    int    `json:"n"`  // its entries
	Done bool   `json:"done,omitempty"`
}

// Import returns the mark of import id, or nil.
func (e *Entry) Import(id string) *ImportMark {
	for i := range e.Imports {
		if e.Imports[i].ID == id {
			return &e.Imports[i]
		}
	}
	return nil
}

// SetImport records m, replacing the mark with the same id. The slice is
// copied first: entries handed to an update function share their slices
// with the entry they were copied from.
func (e *Entry) SetImport(m ImportMark) {
	out := make([]ImportMark, 0, len(e.Imports)+1)
	for _, old := range e.Imports {
		if old.ID != m.ID {
			out = append(out, old)
		}
	}
	out = append(out, m)
	if len(out) > MaxImports {
		out = out[len(out)-MaxImports:]
	}
	e.Imports = out
}

// Parent is the session this one belongs to in the visibility tree: the
// explicit parent first, then the spawner, as OpenClaw's sessions_list does.
func (e *Entry) Parent() string {
	if e.ParentSessionKey != "" {
		return e.ParentSessionKey
	}
	return e.SpawnedBy
}
