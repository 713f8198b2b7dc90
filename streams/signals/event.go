// Package signals is the durable signal log: one stream, SB_SIGNALS,
// holding metadata-only events about session state changes on
// <prefix>.sig.<encodedSessionKey>, and the per-session heads in the
// `sigheads` bucket. The stream sequence is the event sequence (global,
// sparse per session, like OpenClaw's autoincrement), so a session's
// stateVersion is the sequence of its newest event. See docs/signals.md.
package signals

import (
	"strings"
	"unicode/utf8"
)

// Event kinds, OpenClaw's names (docs/signals.md).
const (
	KindHumanDirectMessage = "human_direct_message"
	KindGoalChanged        = "goal_changed"
	KindChildSpawned       = "child_spawned"
	KindRunCompleted       = "run_completed"
	KindRunFailed          = "run_failed"
	KindCompacted          = "compacted"
	KindUpstreamMissing    = "upstream_missing"
	// KindConsoleAction is sessionbus's own: a person acted on the session
	// from the web console (kill, steer, chat, reset, delete); the actor id
	// names them.
	KindConsoleAction = "console_action"
)

// Actor types of an event.
const (
	ActorHuman  = "human"
	ActorAgent  = "agent"
	ActorSystem = "system"
)

// Run outcomes a run_failed event carries in payload.outcome.
const (
	OutcomeError     = "error"
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled"
)

// notifyByKind is NOTIFY_BY_SESSION_STATE_EVENT_KIND: which kinds open a
// notice for the target's watchers. child_spawned seeds the parent's cursor
// instead; completions, failures and compactions are log-only (completion
// announces already tell the parent).
var notifyByKind = map[string]bool{
	KindHumanDirectMessage: true,
	KindGoalChanged:        true,
	KindUpstreamMissing:    true,
	KindChildSpawned:       false,
	KindRunCompleted:       false,
	KindRunFailed:          false,
	KindCompacted:          false,
	KindConsoleAction:      false,
}

// Notifies reports whether an event of kind notifies the target's watchers.
func Notifies(kind string) bool { return notifyByKind[kind] }

// Event is one signal-log row. Sequence is the SB_SIGNALS stream sequence;
// it is not stored in the message body (the stream assigns it) and is filled
// in on every read. Payload holds metadata only, never message content.
type Event struct {
	Sequence   uint64         `json:"sequence,omitempty"`
	DedupeKey  string         `json:"dedupeKey,omitempty"`
	SessionKey string         `json:"sessionKey"`
	SessionID  string         `json:"sessionId,omitempty"`
	AgentID    string         `json:"agentId,omitempty"`
	Kind       string         `json:"kind"`
	ActorType  string         `json:"actorType"`
	ActorID    string         `json:"actorId,omitempty"`
	RunID      string         `json:"runId,omitempty"`
	OccurredAt int64          `json:"occurredAt"` // unix ms
	Summary    string         `json:"summary"`
	Payload    map[string]any `json:"payload,omitempty"`
}

// Changes answers session_status changesSince.
type Changes struct {
	Events                    []Event `json:"events"`
	Truncated                 bool    `json:"truncated"`
	EarliestAvailableSequence uint64  `json:"earliestAvailableSequence"`
	HistoryGap                bool    `json:"historyGap"`
}

// ClassifyActor maps a turn's provenance to the event actor, as OpenClaw
// does: inter_session provenance is the source agent session; internal
// system provenance or an internal event is the system; anything else is a
// human, whose id the caller may fill in (actorID is "" here).
func ClassifyActor(provenanceKind, sourceSessionKey string, internal bool) (actorType, actorID string) {
	switch {
	case provenanceKind == "inter_session":
		return ActorAgent, sourceSessionKey
	case provenanceKind == "internal_system" || internal:
		return ActorSystem, ""
	default:
		return ActorHuman, ""
	}
}

// Project is the tool projection of one event (what changesSince shows):
// sessionKey, sessionId, agentId and dedupeKey dropped; payload reduced to outcome
// (error|timeout|cancelled), channel (a string) and turns (a positive
// integer), and left out when nothing of it remains.
func Project(ev Event) map[string]any {
	m := map[string]any{
		"sequence":   ev.Sequence,
		"kind":       ev.Kind,
		"actorType":  ev.ActorType,
		"occurredAt": ev.OccurredAt,
		"summary":    ev.Summary,
	}
	if ev.ActorID != "" {
		m["actorId"] = ev.ActorID
	}
	if ev.RunID != "" {
		m["runId"] = ev.RunID
	}
	if p := projectPayload(ev.Payload); p != nil {
		m["payload"] = p
	}
	return m
}

// ProjectChanges is the `stateChanges` object of session_status: the
// projected events plus truncated, earliestAvailableSequence and historyGap.
func ProjectChanges(c Changes) map[string]any {
	events := make([]map[string]any, 0, len(c.Events))
	for _, ev := range c.Events {
		events = append(events, Project(ev))
	}
	return map[string]any{
		"events":                    events,
		"truncated":                 c.Truncated,
		"earliestAvailableSequence": c.EarliestAvailableSequence,
		"historyGap":                c.HistoryGap,
	}
}

func projectPayload(p map[string]any) map[string]any {
	out := map[string]any{}
	switch v := p["outcome"]; v {
	case OutcomeError, OutcomeTimeout, OutcomeCancelled:
		out["outcome"] = v
	}
	if v, ok := p["channel"].(string); ok {
		out["channel"] = v
	}
	if n, ok := positiveInt(p["turns"]); ok {
		out["turns"] = n
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// positiveInt accepts the integer forms a payload holds before (Go ints)
// and after (float64) a JSON round trip.
func positiveInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), n > 0
	case int64:
		return n, n > 0
	case float64:
		if n > 0 && n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

// MaxSummaryBytes bounds an event summary: it is one line of metadata
// ("human message via telegram"), never message content.
const MaxSummaryBytes = 200

// oneLine folds a summary onto one line and caps it at MaxSummaryBytes
// without splitting a UTF-8 sequence.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= MaxSummaryBytes {
		return s
	}
	cut := MaxSummaryBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
