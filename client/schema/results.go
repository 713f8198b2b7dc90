package schema

// The tools' results as Go types, field for field the JSON the handlers
// reply with (docs/tools.md). Each struct is the source of its tool's
// result schema. A handler whose result has exactly these fields replies
// with these types (package handlers aliases them); the rest, which keep
// pre-encoded parts for speed (list rows, history messages, send and
// status results), are held to them by TestSchemaResultsMatchHandlers, and
// the live test (schema_live_test.go there) validates real replies against
// the schemas.

// Failure is the ordinary reply of a policy or lookup failure, any tool:
// {"status":"error"|"forbidden",...,"error":"..."}.
type Failure struct {
	Status string `json:"status" jsonschema:"error or forbidden."`
	Error  string `json:"error" jsonschema:"What was refused, in OpenClaw's words."`
}

// SessionRow is one row of sessions_list.
type SessionRow struct {
	Key                string           `json:"key"`
	SessionID          string           `json:"sessionId,omitempty"`
	AgentID            string           `json:"agentId"`
	Kind               string           `json:"kind"`
	Channel            string           `json:"channel"`
	Archived           bool             `json:"archived"`
	Pinned             bool             `json:"pinned"`
	Label              string           `json:"label,omitempty"`
	Group              string           `json:"group,omitempty"`
	DisplayName        string           `json:"displayName,omitempty"`
	DerivedTitle       string           `json:"derivedTitle,omitempty"`
	LastMessagePreview string           `json:"lastMessagePreview,omitempty"`
	ParentSessionKey   string           `json:"parentSessionKey,omitempty"`
	UpdatedAt          int64            `json:"updatedAt,omitempty"`
	StateVersion       uint64           `json:"stateVersion,omitempty"`
	Model              string           `json:"model,omitempty"`
	ContextTokens      int64            `json:"contextTokens,omitempty"`
	TotalTokens        int64            `json:"totalTokens,omitempty"`
	Status             string           `json:"status,omitempty"`
	AbortedLastRun     bool             `json:"abortedLastRun,omitempty"`
	Goal               *Goal            `json:"goal,omitempty" jsonschema:"The session's goal, while active."`
	ChildSessions      []string         `json:"childSessions,omitempty"`
	Messages           []map[string]any `json:"messages,omitempty"`
}

// Goal is a session's goal (kv/sessions.Goal).
type Goal struct {
	Objective string `json:"objective,omitempty" jsonschema:"The objective; absent once cleared."`
	Status    string `json:"status" jsonschema:"active or cleared."`
	CreatedAt int64  `json:"createdAt,omitempty" jsonschema:"Unix ms: when this objective was first set."`
	UpdatedAt int64  `json:"updatedAt" jsonschema:"Unix ms: the latest change, a clear included."`
	ActorType string `json:"actorType,omitempty" jsonschema:"Who made the latest change: human."`
	ActorID   string `json:"actorId,omitempty" jsonschema:"The sender on the channel, or the operator."`
	Channel   string `json:"channel,omitempty" jsonschema:"Where the change came from: a chat channel, or ops."`
}

// Visibility says how sessions_list's scope was restricted.
type Visibility struct {
	Mode       string `json:"mode"`
	Restricted bool   `json:"restricted"`
	Warning    string `json:"warning"`
}

// SessionsListResult is sessions_list's result.
type SessionsListResult struct {
	Count             int           `json:"count"`
	Sessions          []*SessionRow `json:"sessions"`
	HasMore           bool          `json:"hasMore"`
	NextOffset        *int          `json:"nextOffset,omitempty"`
	LimitApplied      int           `json:"limitApplied"`
	TruncationReason  string        `json:"truncationReason,omitempty"`
	EnrichmentOmitted bool          `json:"enrichmentOmitted,omitempty"`
	Visibility        *Visibility   `json:"visibility,omitempty"`
}

// SessionsHistoryResult is sessions_history's result; Messages are the
// transcript's sanitized messages, oldest first, as OpenClaw shapes them.
type SessionsHistoryResult struct {
	SessionKey       string           `json:"sessionKey"`
	Messages         []map[string]any `json:"messages"`
	Truncated        bool             `json:"truncated"`
	DroppedMessages  bool             `json:"droppedMessages"`
	ContentTruncated bool             `json:"contentTruncated"`
	ContentRedacted  bool             `json:"contentRedacted"`
	Bytes            int              `json:"bytes"`
	Offset           *int             `json:"offset,omitempty"`
	NextOffset       *int             `json:"nextOffset,omitempty"`
	HasMore          *bool            `json:"hasMore,omitempty"`
	TotalMessages    *int             `json:"totalMessages,omitempty"`
}

// SearchHit is one transcript entry sessions_search found.
type SearchHit struct {
	SessionKey string `json:"sessionKey" jsonschema:"The session, as sessions_list shows its key."`
	SessionID  string `json:"sessionId,omitempty" jsonschema:"The session's current sessionId."`
	Seq        uint64 `json:"seq" jsonschema:"The entry's 1-based place in the transcript (sessions_history's __openclaw.seq)."`
	Role       string `json:"role" jsonschema:"user or assistant (toolResult when the index holds tool results)."`
	Timestamp  int64  `json:"timestamp" jsonschema:"When the entry was stored, unix milliseconds."`
	Snippet    string `json:"snippet" jsonschema:"The words around the match, matched words between « and »."`
}

// SessionsSearchResult is sessions_search's result: newest hits first.
type SessionsSearchResult struct {
	Results    []SearchHit `json:"results"`
	Count      int         `json:"count"`
	HasMore    bool        `json:"hasMore"`
	NextOffset *int        `json:"nextOffset,omitempty"`
	Indexing   bool        `json:"indexing,omitempty" jsonschema:"The index has not caught up with the transcripts: the newest entries may not be found yet."`
}

// SendDelivery is how sessions_send's reply is delivered.
type SendDelivery struct {
	Status string `json:"status"`
	Mode   string `json:"mode"`
}

// SessionsSendResult is every shape of sessions_send's result.
type SessionsSendResult struct {
	RunID           string        `json:"runId"`
	Status          string        `json:"status"`
	Reply           string        `json:"reply,omitempty"`
	Error           string        `json:"error,omitempty"`
	SessionKey      string        `json:"sessionKey,omitempty"`
	Delivery        *SendDelivery `json:"delivery,omitempty"`
	SentBeforeError bool          `json:"sentBeforeError,omitempty"`
	Watched         *bool         `json:"watched,omitempty"`
}

// StateChanges are session_status's changes after changesSince.
type StateChanges struct {
	Events                    []map[string]any `json:"events"`
	Truncated                 bool             `json:"truncated"`
	EarliestAvailableSequence uint64           `json:"earliestAvailableSequence"`
	HistoryGap                bool             `json:"historyGap"`
}

// RouteOrigin is where a session's conversation came from.
type RouteOrigin struct {
	Provider  string `json:"provider,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
}

// RouteActive is a session's current channel route.
type RouteActive struct {
	Channel   string `json:"channel,omitempty"`
	To        string `json:"to,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
}

// SessionStatusResult is session_status's result.
type SessionStatusResult struct {
	OK            bool          `json:"ok"`
	SessionKey    string        `json:"sessionKey"`
	ChangedModel  bool          `json:"changedModel"`
	StateVersion  uint64        `json:"stateVersion"`
	StateChanges  *StateChanges `json:"stateChanges,omitempty"`
	Model         string        `json:"model,omitempty"`
	ModelProvider string        `json:"modelProvider,omitempty"`
	// ModelOverride is "provider/model", or null when reset; present only
	// when model was given.
	ModelOverride   *string      `json:"modelOverride,omitempty"`
	ThinkingLevel   string       `json:"thinkingLevel,omitempty"`
	Goal            *Goal        `json:"goal,omitempty" jsonschema:"The session's goal; a cleared one keeps who cleared it and when."`
	Origin          *RouteOrigin `json:"origin,omitempty"`
	Active          *RouteActive `json:"active,omitempty"`
	DeliveryContext *RouteActive `json:"deliveryContext,omitempty"`
	StatusText      string       `json:"statusText"`
}

// SessionsYieldResult is sessions_yield's result.
type SessionsYieldResult struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

// SubagentAnnounce is a finished child's announce state.
type SubagentAnnounce struct {
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// SubagentItem is one child in subagents' list.
type SubagentItem struct {
	Index              int               `json:"index"`
	RunID              string            `json:"runId"`
	SessionKey         string            `json:"sessionKey"`
	Label              string            `json:"label"`
	Task               string            `json:"task"`
	Status             string            `json:"status"`
	PendingDescendants int               `json:"pendingDescendants"`
	Runtime            string            `json:"runtime"`
	RuntimeMs          int64             `json:"runtimeMs"`
	ChildSessions      []string          `json:"childSessions,omitempty"`
	Model              string            `json:"model,omitempty"`
	TotalTokens        int64             `json:"totalTokens,omitempty"`
	StartedAt          int64             `json:"startedAt,omitempty"`
	EndedAt            int64             `json:"endedAt,omitempty"`
	Announce           *SubagentAnnounce `json:"announce,omitempty"`
}

// SubagentsListResult is subagents' result for action list.
type SubagentsListResult struct {
	Status              string          `json:"status"`
	Action              string          `json:"action"`
	RequesterSessionKey string          `json:"requesterSessionKey"`
	CallerSessionKey    string          `json:"callerSessionKey"`
	CallerIsSubagent    bool            `json:"callerIsSubagent"`
	Total               int             `json:"total"`
	Active              []*SubagentItem `json:"active"`
	Recent              []*SubagentItem `json:"recent"`
	Text                string          `json:"text"`
}

// SubagentsKillResult is subagents' result for action kill.
type SubagentsKillResult struct {
	Status        string   `json:"status"`
	Action        string   `json:"action"`
	Target        string   `json:"target"`
	RunID         string   `json:"runId,omitempty"`
	SessionKey    string   `json:"sessionKey,omitempty"`
	Label         string   `json:"label,omitempty"`
	Killed        *int     `json:"killed,omitempty"`
	Labels        []string `json:"labels,omitempty"`
	CascadeKilled *int     `json:"cascadeKilled,omitempty"`
	CascadeLabels []string `json:"cascadeLabels,omitempty"`
	Error         string   `json:"error,omitempty"`
	Text          string   `json:"text,omitempty"`
}

// SubagentsSteerResult is subagents' result for action steer.
type SubagentsSteerResult struct {
	Status     string `json:"status"`
	Action     string `json:"action"`
	Target     string `json:"target"`
	RunID      string `json:"runId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	SessionID  string `json:"sessionId,omitempty"`
	Mode       string `json:"mode,omitempty"`
	Label      string `json:"label,omitempty"`
	Error      string `json:"error,omitempty"`
	Text       string `json:"text,omitempty"`
}

// SpawnAttachFile is one attachment as stored.
type SpawnAttachFile struct {
	Name   string `json:"name"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// SpawnAttachSummary sums up a spawn's attachments.
type SpawnAttachSummary struct {
	Count      int               `json:"count"`
	TotalBytes int               `json:"totalBytes"`
	Files      []SpawnAttachFile `json:"files"`
	RelDir     string            `json:"relDir"`
}

// SessionsSpawnResult is sessions_spawn's result.
type SessionsSpawnResult struct {
	Status          string              `json:"status"`
	ChildSessionKey string              `json:"childSessionKey,omitempty"`
	RunID           string              `json:"runId,omitempty"`
	Mode            string              `json:"mode,omitempty"`
	Note            string              `json:"note,omitempty"`
	ModelApplied    *bool               `json:"modelApplied,omitempty"`
	Attachments     *SpawnAttachSummary `json:"attachments,omitempty"`
	Error           string              `json:"error,omitempty"`
}

// AgentsListEntry is one agent in agents_list.
type AgentsListEntry struct {
	ID         string `json:"id"`
	Name       string `json:"name,omitempty"`
	Configured bool   `json:"configured"`
}

// AgentsListResult is agents_list's result.
type AgentsListResult struct {
	Requester string            `json:"requester"`
	AllowAny  bool              `json:"allowAny"`
	Agents    []AgentsListEntry `json:"agents"`
}
