package sessions

import (
	"encoding/json"
	"slices"
)

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
// imports as it is. Its JSON is entryJSON's: the fields of Rare sit beside the
// others.
type Entry struct {
	Key              string           `json:"key"`
	AgentID          string           `json:"agentId,omitempty"`
	SessionID        string           `json:"sessionId,omitempty"`
	CreatedAt        int64            `json:"createdAt,omitempty"`
	UpdatedAt        int64            `json:"updatedAt,omitempty"`
	Label            string           `json:"label,omitempty"`
	DisplayName      string           `json:"displayName,omitempty"`
	Subject          string           `json:"subject,omitempty"`
	Group            string           `json:"group,omitempty"`
	DerivedTitle     string           `json:"derivedTitle,omitempty"`
	Channel          string           `json:"channel,omitempty"`
	LastChannel      string           `json:"lastChannel,omitempty"`
	LastTo           string           `json:"lastTo,omitempty"`
	LastAccountID    string           `json:"lastAccountId,omitempty"`
	LastThreadID     string           `json:"lastThreadId,omitempty"`
	Origin           *Origin          `json:"origin,omitempty"`
	DeliveryContext  *DeliveryContext `json:"deliveryContext,omitempty"`
	ChatType         string           `json:"chatType,omitempty"`
	SpawnedBy        string           `json:"spawnedBy,omitempty"`
	ParentSessionKey string           `json:"parentSessionKey,omitempty"`
	SpawnDepth       *int             `json:"spawnDepth,omitempty"`
	SendPolicy       string           `json:"sendPolicy,omitempty"`
	Model            string           `json:"model,omitempty"`
	ModelProvider    string           `json:"modelProvider,omitempty"`
	InputTokens      int64            `json:"inputTokens,omitempty"`
	OutputTokens     int64            `json:"outputTokens,omitempty"`
	TotalTokens      int64            `json:"totalTokens,omitempty"`
	ContextTokens    int64            `json:"contextTokens,omitempty"`
	Status           string           `json:"status,omitempty"`
	StartedAt        int64            `json:"startedAt,omitempty"`
	EndedAt          int64            `json:"endedAt,omitempty"`
	AbortedLastRun   bool             `json:"abortedLastRun,omitempty"`
	Archived         bool             `json:"archived,omitempty"`
	Pinned           bool             `json:"pinned,omitempty"`
	OwnerID          string           `json:"ownerId,omitempty"`
	CreatorID        string           `json:"creatorId,omitempty"`
	ProjectID        string           `json:"projectId,omitempty"`
	WorkspaceDir     string           `json:"workspaceDir,omitempty"`

	// Rare holds the fields few sessions set (nil: none is): outside the
	// struct, they cost the sessions that lack them nothing, which keeps
	// the index near 1 KiB per session (issue 17). Shared by shallow
	// copies: replace it, never write through it (SetRare).
	Rare *RareFields `json:"-"`

	// Derived is what the index's Derive hook computed from this entry
	// when it was indexed (parsed key facts); never stored.
	Derived any `json:"-"`
}

// RareFields are the entry fields few sessions set, stored flat in the
// entry's JSON under the names below.
type RareFields struct {
	SubagentRole         string
	SubagentControlScope string
	SpawnedWorkspaceDir  string
	ProviderOverride     string
	ModelOverride        string
	ThinkingLevel        string
	Goal                 string
	CacheRead            int64
	CacheWrite           int64
	CompactionCount      int64
	RuntimeMs            int64
	StateVersion         uint64
	// Imports are the transcript files `sessionbus import` loaded into
	// this session (the newest MaxImports), so a repeated or interrupted
	// import never appends a file twice. sessionbus's own field.
	Imports []ImportMark
}

// Rares ("rare fields") returns a copy of the entry's RareFields, the
// fields few sessions set, all zero when none is set.
func (e *Entry) Rares() RareFields {
	if e.Rare == nil {
		return RareFields{}
	}
	return *e.Rare
}

// SetRare changes rare fields on a copy, so entries sharing Rare keep theirs.
func (e *Entry) SetRare(fn func(*RareFields)) {
	r := e.Rares()
	fn(&r)
	e.Rare = r.orNil()
}

func (r RareFields) orNil() *RareFields {
	if r.SubagentRole == "" && r.SubagentControlScope == "" && r.SpawnedWorkspaceDir == "" && r.ProviderOverride == "" &&
		r.ModelOverride == "" && r.ThinkingLevel == "" && r.Goal == "" && r.CacheRead == 0 && r.CacheWrite == 0 &&
		r.CompactionCount == 0 && r.RuntimeMs == 0 && r.StateVersion == 0 && r.Imports == nil {
		return nil
	}
	return &r
}

// entryJSON is Entry as stored: every field flat, in OpenClaw's names.
type entryJSON struct {
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
}

func (e *Entry) wire() entryJSON {
	r := e.Rares()
	return entryJSON{
		Key:                  e.Key,
		AgentID:              e.AgentID,
		SessionID:            e.SessionID,
		CreatedAt:            e.CreatedAt,
		UpdatedAt:            e.UpdatedAt,
		Label:                e.Label,
		DisplayName:          e.DisplayName,
		Subject:              e.Subject,
		Group:                e.Group,
		DerivedTitle:         e.DerivedTitle,
		Channel:              e.Channel,
		LastChannel:          e.LastChannel,
		LastTo:               e.LastTo,
		LastAccountID:        e.LastAccountID,
		LastThreadID:         e.LastThreadID,
		Origin:               e.Origin,
		DeliveryContext:      e.DeliveryContext,
		ChatType:             e.ChatType,
		SpawnedBy:            e.SpawnedBy,
		ParentSessionKey:     e.ParentSessionKey,
		SpawnDepth:           e.SpawnDepth,
		SubagentRole:         r.SubagentRole,
		SubagentControlScope: r.SubagentControlScope,
		SpawnedWorkspaceDir:  r.SpawnedWorkspaceDir,
		SendPolicy:           e.SendPolicy,
		Model:                e.Model,
		ModelProvider:        e.ModelProvider,
		ProviderOverride:     r.ProviderOverride,
		ModelOverride:        r.ModelOverride,
		ThinkingLevel:        r.ThinkingLevel,
		InputTokens:          e.InputTokens,
		OutputTokens:         e.OutputTokens,
		TotalTokens:          e.TotalTokens,
		ContextTokens:        e.ContextTokens,
		CacheRead:            r.CacheRead,
		CacheWrite:           r.CacheWrite,
		CompactionCount:      r.CompactionCount,
		Status:               e.Status,
		StartedAt:            e.StartedAt,
		EndedAt:              e.EndedAt,
		RuntimeMs:            r.RuntimeMs,
		AbortedLastRun:       e.AbortedLastRun,
		Archived:             e.Archived,
		Pinned:               e.Pinned,
		Goal:                 r.Goal,
		OwnerID:              e.OwnerID,
		CreatorID:            e.CreatorID,
		ProjectID:            e.ProjectID,
		WorkspaceDir:         e.WorkspaceDir,
		StateVersion:         r.StateVersion,
		Imports:              r.Imports,
	}
}
func (e *Entry) fromWire(w *entryJSON) {
	*e = Entry{
		Derived: e.Derived,
		Rare: RareFields{
			SubagentRole:         w.SubagentRole,
			SubagentControlScope: w.SubagentControlScope,
			SpawnedWorkspaceDir:  w.SpawnedWorkspaceDir,
			ProviderOverride:     w.ProviderOverride,
			ModelOverride:        w.ModelOverride,
			ThinkingLevel:        w.ThinkingLevel,
			CacheRead:            w.CacheRead,
			CacheWrite:           w.CacheWrite,
			CompactionCount:      w.CompactionCount,
			RuntimeMs:            w.RuntimeMs,
			Goal:                 w.Goal,
			StateVersion:         w.StateVersion,
			Imports:              w.Imports,
		}.orNil(),
		Key:              w.Key,
		AgentID:          w.AgentID,
		SessionID:        w.SessionID,
		CreatedAt:        w.CreatedAt,
		UpdatedAt:        w.UpdatedAt,
		Label:            w.Label,
		DisplayName:      w.DisplayName,
		Subject:          w.Subject,
		Group:            w.Group,
		DerivedTitle:     w.DerivedTitle,
		Channel:          w.Channel,
		LastChannel:      w.LastChannel,
		LastTo:           w.LastTo,
		LastAccountID:    w.LastAccountID,
		LastThreadID:     w.LastThreadID,
		Origin:           w.Origin,
		DeliveryContext:  w.DeliveryContext,
		ChatType:         w.ChatType,
		SpawnedBy:        w.SpawnedBy,
		ParentSessionKey: w.ParentSessionKey,
		SpawnDepth:       w.SpawnDepth,
		SendPolicy:       w.SendPolicy,
		Model:            w.Model,
		ModelProvider:    w.ModelProvider,
		InputTokens:      w.InputTokens,
		OutputTokens:     w.OutputTokens,
		TotalTokens:      w.TotalTokens,
		ContextTokens:    w.ContextTokens,
		Status:           w.Status,
		StartedAt:        w.StartedAt,
		EndedAt:          w.EndedAt,
		AbortedLastRun:   w.AbortedLastRun,
		Archived:         w.Archived,
		Pinned:           w.Pinned,
		OwnerID:          w.OwnerID,
		CreatorID:        w.CreatorID,
		ProjectID:        w.ProjectID,
		WorkspaceDir:     w.WorkspaceDir,
	}
}

// MarshalJSON writes the stored form.
func (e Entry) MarshalJSON() ([]byte, error) { return e.encode() }

// encode is MarshalJSON without json.Marshal's pass over its output
// (json.Marshal of an Entry validates and compacts what MarshalJSON
// wrote, most of its cost): the same bytes, what the store writes.
func (e *Entry) encode() ([]byte, error) {
	w := e.wire()
	return json.Marshal(&w)
}

// UnmarshalJSON reads the stored form into e, over what e holds, as
// json.Unmarshal into a struct does.
func (e *Entry) UnmarshalJSON(data []byte) error {
	w := e.wire()
	w.Imports = slices.Clone(w.Imports) // may be shared: decoding reuses its array
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	e.fromWire(&w)
	return nil
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

// Import returns (a copy of) the mark of import id, or nil.
func (e *Entry) Import(id string) *ImportMark {
	if e.Rare == nil {
		return nil
	}
	for i := range e.Rare.Imports {
		if e.Rare.Imports[i].ID == id {
			m := e.Rare.Imports[i]
			return &m
		}
	}
	return nil
}

// SetImport records m, replacing the mark with the same id. The slice is
// copied first: entries handed to an update function share their slices
// with the entry they were copied from.
func (e *Entry) SetImport(m ImportMark) {
	imports := e.Rares().Imports
	out := make([]ImportMark, 0, len(imports)+1)
	for _, old := range imports {
		if old.ID != m.ID {
			out = append(out, old)
		}
	}
	out = append(out, m)
	if len(out) > MaxImports {
		out = out[len(out)-MaxImports:]
	}
	e.SetRare(func(r *RareFields) { r.Imports = out })
}

// Parent is the session this one belongs to in the visibility tree: the
// explicit parent first, then the spawner, as OpenClaw's sessions_list does.
func (e *Entry) Parent() string {
	if e.ParentSessionKey != "" {
		return e.ParentSessionKey
	}
	return e.SpawnedBy
}
