// Package runreq is the run request: the body of a message on
// <prefix>.runs.<agentId> (streams/runqueue), one agent turn to execute.
// The child registry (kv/subagents) keeps a copy of a child's current
// request, so the type lives here, below both storage packages.
package runreq

// Provenance marks a message that came from another session: who sent it,
// from which channel, through which tool.
type Provenance struct {
	Kind             string `json:"kind"` // external_user | inter_session | internal_system
	SourceSessionKey string `json:"sourceSessionKey,omitempty"`
	SourceChannel    string `json:"sourceChannel,omitempty"`
	SourceTool       string `json:"sourceTool,omitempty"`
}

// A2A asks the gateway to run the agent-to-agent flow (ping-pong turns, then
// the announce step) after the primary run; its progress lives in the a2a
// bucket.
type A2A struct {
	RequesterKey      string `json:"requesterKey"`
	RequesterChannel  string `json:"requesterChannel,omitempty"`
	TargetDisplayKey  string `json:"targetDisplayKey"`
	OriginalMessage   string `json:"originalMessage"`
	MaxPingPongTurns  int    `json:"maxPingPongTurns"`
	AnnounceTimeoutMs int64  `json:"announceTimeoutMs"`
}

// Route is a channel destination: where a run's reply is delivered
// (<prefix>.deliver.<channel>).
type Route struct {
	Channel   string `json:"channel"`
	To        string `json:"to,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
	// From is the sender whose message the run answers (an inbound
	// turn's `from`): a group's per-sender tool policy is matched on it.
	From string `json:"from,omitempty"`
}

// AnnounceRef marks a run that carries a sub-agent's completion announce
// into its requester: once the run records its prompt the announce is in
// the requester's transcript, and the child's registry record says so.
type AnnounceRef struct {
	ChildSessionKey string `json:"childSessionKey"`
	ChildRunID      string `json:"childRunId"`
}

// NoticeRef marks a run that wakes a watcher with a parent notice: once
// the run recorded its prompt the notice is acknowledged.
type NoticeRef struct {
	Watcher string `json:"watcher"`
	Target  string `json:"target"`
	// LastSeenSequence names the notice (its "changesSince"): only that
	// notice is acknowledged, never a follow-up opened since.
	LastSeenSequence uint64 `json:"lastSeenSequence,omitempty"`
}

// Request is the body of a message on <prefix>.runs.<agentId>: one agent
// turn to execute.
type Request struct {
	RunID             string      `json:"runId"`
	SessionKey        string      `json:"sessionKey"` // store key of the session the turn runs in
	AgentID           string      `json:"agentId"`
	Message           string      `json:"message"` // body without provenance lines (what scripts match)
	Prompt            string      `json:"prompt"`  // the annotated prompt stored as the user message
	ExtraSystemPrompt string      `json:"extraSystemPrompt,omitempty"`
	Provenance        *Provenance `json:"provenance,omitempty"`
	Lane              string      `json:"lane,omitempty"`
	TimeoutSeconds    int         `json:"timeoutSeconds,omitempty"` // 0 = the gateway default
	ChainID           string      `json:"chainId"`
	Hop               int         `json:"hop"`
	A2A               *A2A        `json:"a2a,omitempty"`
	// Step names an A2A continuation ("pingpong:<n>", "announce"); empty for
	// an ordinary turn.
	Step      string `json:"step,omitempty"`
	ParentRun string `json:"parentRun,omitempty"` // the primary run of an A2A step
	CreatedAt int64  `json:"createdAt"`
	// Recorded says the submitter wrote a pending record before queueing.
	// A caller that waits for the outcome does not: the first gateway to
	// take the run creates its record (running), one write instead of two,
	// and the caller writes pending itself should it stop waiting first.
	Recorded bool `json:"recorded,omitempty"`
	// ReplyTo, when set, is where the gateway delivers the run's reply
	// once it is recorded ok (<prefix>.deliver.<channel>): a human turn
	// brought in by a channel adapter is answered on its channel, a
	// top-level requester's announce on its stored route.
	ReplyTo *Route `json:"replyTo,omitempty"`
	// Announce is set on a run that delivers a sub-agent's announce.
	Announce *AnnounceRef `json:"announce,omitempty"`
	// Notice is set on a run that wakes a watcher with a parent notice.
	Notice *NoticeRef `json:"notice,omitempty"`
	// Compact, when set, makes the run a compaction of the session
	// (`sessionbus session compact`) instead of a turn: under the
	// session's lane, with no prompt and no reply.
	Compact *CompactRef `json:"compact,omitempty"`
}

// CompactRef is an on-demand compaction.
type CompactRef struct {
	// Instructions are an operator's extra focus for the summary.
	Instructions string `json:"instructions,omitempty"`
}
