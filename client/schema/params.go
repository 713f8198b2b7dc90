package schema

// The tools' parameters as Go types. Each struct is the source of its
// tool's parameter schema (jsonschema tags are the descriptions the model
// and MCP hosts see), and the Go client sends them as they are: a field
// left at its zero value is omitted, so the handler applies its default.
// Pointers mark parameters whose zero value is itself meaningful (offset 0
// turns on sessions_history's pagination fields; timeoutSeconds 0 means
// fire-and-forget).
//
// The handlers read their parameters by name (rules.Params); the
// test TestSchemaParamsMatchHandlers in package handlers fails when a
// handler reads a name that is not here, or a name here is never read.

// SessionsListParams are sessions_list's parameters.
type SessionsListParams struct {
	Kinds                []string `json:"kinds,omitempty" jsonschema:"Only sessions of these kinds: main, group, cron, hook, node, other."`
	Limit                int      `json:"limit,omitempty" jsonschema:"Maximum rows to return (default 100, at most 200)."`
	Offset               int      `json:"offset,omitempty" jsonschema:"Rows to skip, for paging (use the returned nextOffset)."`
	ActiveMinutes        int      `json:"activeMinutes,omitempty" jsonschema:"Only sessions updated within this many minutes."`
	MessageLimit         int      `json:"messageLimit,omitempty" jsonschema:"Attach up to this many recent messages per session (0-20)."`
	Label                string   `json:"label,omitempty" jsonschema:"Only the session with this label."`
	AgentID              string   `json:"agentId,omitempty" jsonschema:"Only sessions of this agent."`
	Search               string   `json:"search,omitempty" jsonschema:"Case-insensitive substring over key, label and names."`
	Archived             any      `json:"archived,omitempty" jsonschema:"false (default): unarchived sessions; true: archived ones; \"all\": both."`
	Pinned               *bool    `json:"pinned,omitempty" jsonschema:"Only pinned (true) or unpinned (false) sessions."`
	Group                string   `json:"group,omitempty" jsonschema:"Only sessions of this group."`
	OwnerID              string   `json:"ownerId,omitempty" jsonschema:"Only sessions with this ownerId."`
	CreatorID            string   `json:"creatorId,omitempty" jsonschema:"Only sessions with this creatorId."`
	ProjectID            string   `json:"projectId,omitempty" jsonschema:"Only sessions with this projectId."`
	WorkspaceDir         string   `json:"workspaceDir,omitempty" jsonschema:"Only sessions with this workspaceDir."`
	ExcludeSubagents     bool     `json:"excludeSubagents,omitempty" jsonschema:"Leave sub-agent sessions out."`
	IncludeDerivedTitles bool     `json:"includeDerivedTitles,omitempty" jsonschema:"Add derivedTitle: the first user message, one line."`
	IncludeLastMessage   bool     `json:"includeLastMessage,omitempty" jsonschema:"Add lastMessagePreview: the newest non-tool message, one line."`
}

// SessionsHistoryParams are sessions_history's parameters.
type SessionsHistoryParams struct {
	SessionKey   string `json:"sessionKey" jsonschema:"Session key, display key (main), \"current\", or a session id."`
	Limit        int    `json:"limit,omitempty" jsonschema:"Newest messages to return (default 200, at most 1000)."`
	Offset       *int   `json:"offset,omitempty" jsonschema:"Newest messages to skip; page backward with the returned nextOffset."`
	IncludeTools bool   `json:"includeTools,omitempty" jsonschema:"Include tool result messages (default false)."`
}

// SessionsSearchParams are sessions_search's parameters.
type SessionsSearchParams struct {
	Query      string `json:"query" jsonschema:"Words to find, as one phrase: in order, case and diacritics ignored (at most 512 characters)."`
	Limit      int    `json:"limit,omitempty" jsonschema:"Maximum hits to return (default 25, at most 25)."`
	Offset     int    `json:"offset,omitempty" jsonschema:"Hits to skip, for paging (use the returned nextOffset; at most 10000)."`
	SessionKey string `json:"sessionKey,omitempty" jsonschema:"Search only this visible session: key, display key (main), \"current\", or a session id."`
}

// SessionsSendParams are sessions_send's parameters.
type SessionsSendParams struct {
	Message        string `json:"message" jsonschema:"The message to send."`
	SessionKey     string `json:"sessionKey,omitempty" jsonschema:"Target session key (or label/agentId instead)."`
	Label          string `json:"label,omitempty" jsonschema:"Target session label."`
	AgentID        string `json:"agentId,omitempty" jsonschema:"Agent scoping the label; alone, targets that agent's main session."`
	TimeoutSeconds *int   `json:"timeoutSeconds,omitempty" jsonschema:"Seconds to wait for the reply (default 30; 0 = do not wait)."`
	IdempotencyKey string `json:"idempotencyKey,omitempty" jsonschema:"Same key returns the first call's runId instead of sending twice."`
	Watch          bool   `json:"watch,omitempty" jsonschema:"Watch the target: be notified when it changes."`
}

// SessionStatusParams are session_status's parameters.
type SessionStatusParams struct {
	SessionKey    string  `json:"sessionKey,omitempty" jsonschema:"Session to inspect (default: the current session)."`
	Model         *string `json:"model,omitempty" jsonschema:"Set a per-session model override (\"default\" resets)."`
	ThinkingLevel *string `json:"thinkingLevel,omitempty" jsonschema:"Set the thinking level (\"default\" resets)."`
	ChangesSince  *int    `json:"changesSince,omitempty" jsonschema:"Include state changes after this stateVersion."`
}

// SessionsYieldParams are sessions_yield's parameters.
type SessionsYieldParams struct {
	Message string `json:"message,omitempty" jsonschema:"Optional note (default \"Turn yielded.\")."`
}

// SubagentsParams are subagents' parameters.
type SubagentsParams struct {
	Action        string `json:"action,omitempty" jsonschema:"What to do (default list)."`
	Target        string `json:"target,omitempty" jsonschema:"For kill/steer: \"last\", a 1-based index, a child session key, a label, or \"all\" (kill)."`
	Message       string `json:"message,omitempty" jsonschema:"For steer: the new instruction (at most 4000 characters)."`
	RecentMinutes int    `json:"recentMinutes,omitempty" jsonschema:"For list: include runs ended within this many minutes (default 30)."`
}

// SpawnAttachment is one file given to a sub-agent.
type SpawnAttachment struct {
	Name     string `json:"name" jsonschema:"A plain file name, unique among the attachments."`
	Content  string `json:"content" jsonschema:"The file's content, in encoding."`
	Encoding string `json:"encoding,omitempty" jsonschema:"utf8 (default) or base64."`
	MimeType string `json:"mimeType,omitempty" jsonschema:"The file's MIME type."`
}

// SpawnAttachAs says where attachments are placed.
type SpawnAttachAs struct {
	MountPath string `json:"mountPath,omitempty" jsonschema:"Relative directory the attachment entries name their files under."`
}

// SessionsSpawnParams are sessions_spawn's parameters.
type SessionsSpawnParams struct {
	Task              string            `json:"task" jsonschema:"What the sub-agent should do."`
	Label             string            `json:"label,omitempty" jsonschema:"Label for the child session."`
	Runtime           string            `json:"runtime,omitempty" jsonschema:"subagent (default) or acp (an external harness; the target agent needs runtime: exec)."`
	AgentID           string            `json:"agentId,omitempty" jsonschema:"Agent to run the child as (default: your own agent)."`
	Model             string            `json:"model,omitempty" jsonschema:"Model override for the child."`
	Thinking          string            `json:"thinking,omitempty" jsonschema:"Thinking level for the child: off, minimal, low, medium, high or xhigh."`
	RunTimeoutSeconds *int              `json:"runTimeoutSeconds,omitempty" jsonschema:"Child run timeout in seconds (0 = none)."`
	TimeoutSeconds    *int              `json:"timeoutSeconds,omitempty" jsonschema:"Legacy alias of runTimeoutSeconds."`
	Thread            bool              `json:"thread,omitempty" jsonschema:"Bind the child to your channel thread (default false)."`
	Mode              string            `json:"mode,omitempty" jsonschema:"run: one-shot (default); session: persistent (needs thread)."`
	Cleanup           string            `json:"cleanup,omitempty" jsonschema:"What happens to the child session when done (default keep)."`
	Sandbox           string            `json:"sandbox,omitempty" jsonschema:"inherit (default) or require a sandboxed child."`
	Context           string            `json:"context,omitempty" jsonschema:"isolated: the child starts clean (default); fork: it starts with a copy of your transcript."`
	LightContext      bool              `json:"lightContext,omitempty" jsonschema:"Give the child a minimal system prompt (runtime subagent only)."`
	StreamTo          string            `json:"streamTo,omitempty" jsonschema:"runtime acp only: parent."`
	ResumeSessionID   string            `json:"resumeSessionId,omitempty" jsonschema:"runtime acp only: a harness session to resume."`
	Cwd               string            `json:"cwd,omitempty" jsonschema:"runtime acp only: the harness's working directory."`
	Attachments       []SpawnAttachment `json:"attachments,omitempty" jsonschema:"Files for the child (runtime subagent only; at most 50)."`
	AttachAs          *SpawnAttachAs    `json:"attachAs,omitempty" jsonschema:"Where the attachments are placed."`
	IdempotencyKey    string            `json:"idempotencyKey,omitempty" jsonschema:"Same key returns the first call's childSessionKey and runId instead of spawning twice."`
}

// AgentsListParams are agents_list's parameters: none.
type AgentsListParams struct{}
