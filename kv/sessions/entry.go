package sessions

import (
	"encoding/json"
	"fmt"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Origin is where a session was created.
type Origin struct {
	Provider  string `json:"provider,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
	ChatType  string `json:"chatType,omitempty"`
	// From and To are the sender and the chat of the message that
	// created the session (OpenClaw's origin.from and origin.to).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// DeliveryContext is the persisted delivery route of a session.
type DeliveryContext struct {
	Channel   string `json:"channel,omitempty"`
	To        string `json:"to,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
}

// Entry is one session in the store, with OpenClaw's session-store fields and
// the sessions_list row fields, so an OpenClaw store entry imports as it is.
//
// An entry has two forms. In memory (Entry) the fields few sessions set sit
// apart in Rare, which keeps the index near 1 KiB per session
// (BenchmarkIndexBytesPerSession). Stored (entryJSON) every field is flat,
// under OpenClaw's names and in its order. The copies between the two
// (entry_wire.go) are generated from these declarations.
type Entry struct {
	Key              string
	AgentID          string
	SessionID        string
	CreatedAt        int64
	UpdatedAt        int64
	Label            string
	DisplayName      string
	Subject          string
	Group            string
	Channel          string
	LastChannel      string
	LastTo           string
	LastAccountID    string
	Origin           *Origin
	DeliveryContext  *DeliveryContext
	ChatType         string
	SpawnedBy        string
	ParentSessionKey string
	SpawnDepth       *int
	Model            string
	ModelProvider    string
	InputTokens      int64
	OutputTokens     int64
	TotalTokens      int64
	ContextTokens    int64
	Status           string
	StartedAt        int64
	EndedAt          int64
	AbortedLastRun   bool
	Archived         bool
	Pinned           bool

	// Rare holds the fields few sessions set (nil: none is): outside the
	// struct, they cost the sessions that lack them nothing. Shared by
	// shallow copies: replace it, never write through it (SetRare).
	Rare *RareFields `json:"-"`

	// Derived is what the index's Derive hook computed from this entry
	// when it was indexed (parsed key facts); never stored.
	Derived *Derived `json:"-"`
}

// Derived is what the tools compute from an entry once, when the index
// takes it in (the hook, Derive, is theirs: handlers.IndexDerive), so
// listing does not parse every key again per call. This package only keeps
// it. A pointer to a struct of this package, not an any: 8 bytes where an
// interface takes 16, which moves Entry from the 416-byte size class to
// the 384 one (32 B a session).
type Derived struct {
	// Names are the agent id and the channel, shared by every session
	// with the same pair (a handful per deployment).
	Names *DerivedNames
	// KindAt is the tools' kind as its place in their table of kinds.
	KindAt uint8
	// Malformed, CronRun and Subagent are the key's shape.
	Malformed, CronRun, Subagent bool
	// Plain: every string a sessions_list row takes from the entry or
	// these fields is written in JSON as it is (no byte to escape).
	Plain bool
	// ParentSameAgent: the entry's parent key parses to its agent id.
	ParentSameAgent bool
}

// DerivedNames is the part of Derived that sessions share.
type DerivedNames struct{ AgentID, Channel string }

// RareFields are the entry fields few sessions set, stored flat in the
// entry's JSON beside the others.
type RareFields struct {
	// The stored title, the thread of the last route, the send override
	// and OpenClaw's newer inventory fields (owner, creator, project, workspace):
	// most sessions have none, and out of Entry they take its struct from
	// the 512-byte size class to the 416 one (96 B a session in the index).
	DerivedTitle string
	LastThreadID string
	SendPolicy   string
	OwnerID      string
	CreatorID    string
	ProjectID    string
	WorkspaceDir string

	SubagentRole         string
	SubagentControlScope string
	SpawnedWorkspaceDir  string
	ProviderOverride     string
	ModelOverride        string
	ThinkingLevel        string
	Goal                 *Goal
	CacheRead            int64
	CacheWrite           int64
	CompactionCount      int64
	RuntimeMs            int64
	StateVersion         uint64
	// SessionStartedAt is when the current sessionId began (the daily
	// reset's clock) and LastInteractionAt the last human message (the
	// idle reset's): unix ms, OpenClaw's fields. Other writes to the entry
	// (runs, settings) move neither.
	SessionStartedAt  int64
	LastInteractionAt int64
	// Imports are the transcript files `sessionbus import` loaded into
	// this session (the newest MaxImports), so a repeated or interrupted
	// import never appends a file twice. sessionbus's own field.
	Imports []ImportMark
	// QueueMode, QueueDebounceMs, QueueCap and QueueDrop are the session's
	// /queue override (OpenClaw's fields; "" / nil / 0: the config's).
	QueueMode       string
	QueueDebounceMs *int64
	QueueCap        int64
	QueueDrop       string
	// Waiting lists the runs that found the session busy, in queue order
	// (their SB_RUNS sequence): a run starts only when none ahead of it
	// still waits. sessionbus's own field.
	Waiting []WaitingRun
}

// WaitingRun is a run waiting for its session (RareFields.Waiting).
type WaitingRun struct {
	Run string `json:"run"`
	Seq uint64 `json:"seq"` // its request's SB_RUNS stream sequence
}

// Rares ("rare fields") returns a copy of the entry's RareFields, the
// fields few sessions set, all zero when none is set.
func (e *Entry) Rares() RareFields {
	if e.Rare == nil {
		return RareFields{}
	}
	return *e.Rare
}

// DerivedTitle, LastThreadID, SendPolicy, OwnerID, CreatorID, ProjectID
// and WorkspaceDir read the rare fields of those names without copying them
// all (Rares does).
func (e *Entry) DerivedTitle() string { return e.rare().DerivedTitle }
func (e *Entry) LastThreadID() string { return e.rare().LastThreadID }
func (e *Entry) SendPolicy() string   { return e.rare().SendPolicy }
func (e *Entry) OwnerID() string      { return e.rare().OwnerID }
func (e *Entry) CreatorID() string    { return e.rare().CreatorID }
func (e *Entry) ProjectID() string    { return e.rare().ProjectID }
func (e *Entry) WorkspaceDir() string { return e.rare().WorkspaceDir }

var noRare RareFields

// rare is the entry's RareFields, or a shared zero one: read only.
func (e *Entry) rare() *RareFields {
	if e.Rare == nil {
		return &noRare
	}
	return e.Rare
}

// SetRare changes rare fields on a copy, so entries sharing Rare keep theirs.
func (e *Entry) SetRare(fn func(*RareFields)) {
	r := e.Rares()
	fn(&r)
	e.Rare = r.orNil()
}

//go:generate go run gen_entry_wire.go

// entryJSON is an entry as stored: every field of Entry and RareFields
// flat, under OpenClaw's names and in its order (other processes and the
// tests read these bytes). It stays a struct of its own, copied to and from
// Entry, because encoding/json writes a struct's fields in their declared
// order and the rare fields sit between the others here; and because
// json.Marshal of a plain struct is the store's encoder, and decoding into
// one the definition of what any stored value decodes to (unknown fields
// ignored, names matched case-insensitively, decoding over what is there),
// which the generated plain decoder (decodePlain) must give too.
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
	Goal                 *Goal            `json:"goal,omitempty"`
	OwnerID              string           `json:"ownerId,omitempty"`
	CreatorID            string           `json:"creatorId,omitempty"`
	ProjectID            string           `json:"projectId,omitempty"`
	WorkspaceDir         string           `json:"workspaceDir,omitempty"`
	StateVersion         uint64           `json:"stateVersion,omitempty"`
	SessionStartedAt     int64            `json:"sessionStartedAt,omitempty"`
	LastInteractionAt    int64            `json:"lastInteractionAt,omitempty"`
	Imports              []ImportMark     `json:"sessionbusImports,omitempty"`
	QueueMode            string           `json:"queueMode,omitempty"`
	QueueDebounceMs      *int64           `json:"queueDebounceMs,omitempty"`
	QueueCap             int64            `json:"queueCap,omitempty"`
	QueueDrop            string           `json:"queueDrop,omitempty"`
	Waiting              []WaitingRun     `json:"sessionbusWaiting,omitempty"`
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
	// Nearly every stored entry is in the plain form the store writes,
	// read without reflection (plaindec.go); any other is read in full.
	if *e == (Entry{}) {
		if e.decodePlain(data, nil) {
			return nil
		}
		*e = Entry{}
	}
	return e.decodeFull(data)
}

// decodeInterned is a new entry decoded from data as UnmarshalJSON
// decodes it, with the strings in holds taken from there.
func decodeInterned(data []byte, in *interner) (*Entry, error) {
	e := new(Entry)
	if e.decodePlain(data, in) {
		return e, nil
	}
	*e = Entry{}
	if err := e.decodeFull(data); err != nil {
		return nil, fmt.Errorf("corrupt session record: %w", err)
	}
	return e, nil
}

// decodeFull is UnmarshalJSON by the full decoder: what it gives is the
// definition of an entry's decoding, for every input.
func (e *Entry) decodeFull(data []byte) error {
	w := e.wire()
	w.Imports = slices.Clone(w.Imports) // may be shared: decoding reuses its array
	// may be shared: decoding writes through the pointer
	if w.Goal != nil {
		g := *w.Goal
		w.Goal = &g
	}
	// The v2 decoder with every v1 option reads the same bytes to the same
	// struct as encoding/json, in under half the time: a worker starting
	// on a million sessions spends most of its load decoding them.
	if err := jsonv2.Unmarshal(data, &w, decodeOptions); err != nil {
		return err
	}
	e.fromWire(&w)
	return nil
}

var decodeOptions = jsonv1.DefaultOptionsV1()

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
