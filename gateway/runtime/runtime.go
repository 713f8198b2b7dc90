// Package runtime runs one agent turn with the runtime an agent's config
// names in agents.list[].runtime: "script" (deterministic rules, for tests,
// demos and benchmarks), "exec" (one external process per turn) or "openai"
// (an OpenAI-compatible chat-completions endpoint with the session tools
// offered as function tools).
//
// The package does not talk to NATS, runs or transcripts: the gateway
// builds a Turn, hands in a Tools that executes session tools as the turn's
// session, and records the Result. That keeps every runtime testable without
// a server.
package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/config"
)

// Runtime names accepted in agents.list[].runtime.
const (
	KindScript = "script"
	KindExec   = "exec"
	KindOpenAI = "openai"
)

// Turn is everything a runtime may use to produce one reply.
type Turn struct {
	SessionKey string
	AgentID    string
	RunID      string
	// Message is the inbound body without the inter-session provenance
	// lines: what script rules match and {{message}} expands to, so a rule
	// does not have to anticipate the annotation.
	Message string
	// Prompt is the full annotated prompt as the transcript stores it; model
	// runtimes see this, as in the reference.
	Prompt string
	// ExtraSystemPrompt carries e.g. the "Agent-to-agent message context:"
	// lines, which belong in the system role rather than the user turn.
	ExtraSystemPrompt string
	// Model, when set, is the model id the turn runs with instead of the
	// runtime's configured one: the session's override (session_status
	// model) or the agent's agents.list[].model. Runtimes without a model
	// ignore it.
	Model string
	// Thinking is the session's thinking level (session_status
	// thinkingLevel, or the spawn's thinking for a sub-agent); "" for
	// none. The openai runtime sends it as reasoning_effort
	// (ReasoningEffort); the others ignore it.
	Thinking string
	// History holds recent transcript messages, oldest first. It may end with
	// this turn's own prompt; the openai runtime drops such a duplicate.
	History []json.RawMessage
	// NATSURL, Token and ToolsSubject let an exec process call tools over NATS
	// itself, authenticated as this session: request subject
	// ToolsSubject+"."+tool, token in the Sessionbus-Token header.
	NATSURL      string
	Token        string
	ToolsSubject string // e.g. "sb.tools"; exec sends the default prefix's when empty
	// NATSUser, when set, issues the turn's process a NATS user of its own
	// that lives at most ttl: the exec runtime calls it once per turn and
	// hands the process the credentials file. The gateway revokes the user
	// when Run returns. nil (a server without NATS auth): no file.
	NATSUser func(ttl time.Duration) (*NATSUser, error)
	// AllowedTools names the session tools this turn may call (the
	// session's tool policy, rules.SessionTools); nil offers every tool.
	AllowedTools []string
	// Emit, when set, receives the turn's output as it arrives: text
	// deltas and tool activity, in order, from the goroutine that runs the
	// turn. The gateway publishes them as live output; it must return at
	// once, since the turn waits on it. The turn's end (done, error) is the
	// gateway's to tell, not the runtime's.
	Emit func(Event)
	// Steering, when set, brings the messages steered into the running
	// turn (messages.queue steer modes): runtimes that ask a model again
	// after its tool calls (openai) take them; the others ignore it.
	Steering Steering
}

// Steering feeds a running turn the human messages steered into it.
// Drain, before each model request, returns the messages to append as
// user messages, in the order they came; Pending, before each tool call,
// says a message waits, and the calls the model asked for that have not
// started are then answered config.SkippedToolText instead of run, so the
// model sees the message before anything else runs.
type Steering interface {
	Pending(ctx context.Context) bool
	Drain(ctx context.Context) []string
}

// Event kinds a runtime emits.
const (
	EventText       = "text"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
)

// Event is one piece of a turn's live output.
type Event struct {
	Type      string
	Delta     string          // EventText
	Tool      string          // EventToolCall, EventToolResult
	Arguments json.RawMessage // EventToolCall
	OK        bool            // EventToolResult: no thrown error and no error status
}

func (t *Turn) emit(e Event) {
	if t.Emit != nil {
		t.Emit(e)
	}
}

func (t *Turn) emitText(s string) {
	if s != "" {
		t.emit(Event{Type: EventText, Delta: s})
	}
}

// emitToolCall tells of a call about to be made.
func (t *Turn) emitToolCall(tool string, params json.RawMessage) {
	t.emit(Event{Type: EventToolCall, Tool: tool, Arguments: params})
}

// emitToolResult tells whether a call succeeded, never its result: that
// may hold other sessions' data.
func (t *Turn) emitToolResult(c ToolCall) {
	if t.Emit == nil {
		return
	}
	ok := c.Err == ""
	if ok && len(c.Result) > 0 {
		var r struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(c.Result, &r) == nil && (r.Status == "error" || r.Status == "forbidden") {
			ok = false
		}
	}
	t.emit(Event{Type: EventToolResult, Tool: c.Name, OK: ok})
}

// NATSUser is a turn's own NATS identity.
type NATSUser struct {
	Creds []byte // a credentials file (the user's JWT and seed), as nats --creds reads it
	Inbox string // the only inbox prefix the user may subscribe to
}

// ToolCall records one tool invocation made during a turn.
type ToolCall struct {
	Name   string          `json:"name"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Err    string          `json:"error,omitempty"`
}

// Result is a finished turn.
type Result struct {
	// Reply is the final assistant text; "" is allowed. REPLY_SKIP and
	// ANNOUNCE_SKIP are plain text here: the gateway gives them meaning.
	Reply string
	// ToolCalls lists the tools invoked during the turn, in order.
	ToolCalls []ToolCall
	// Yielded says the turn ended on sessions_yield: it has no reply of its
	// own (Reply is empty), and the session's next message (a child's
	// completion announce, an inbound event) starts the next turn.
	Yielded bool
	// Usage is what the provider reported the turn's model calls cost
	// (a script rule's declared usage); nil when it reported nothing.
	Usage *Usage
}

// YieldTool is the tool that ends a turn.
const YieldTool = "sessions_yield"

// Yielded reports whether a tool call's result is an accepted yield
// ({"status":"yielded"}): the runtime then ends the turn at once. A refused
// yield ("Yield not supported in this context") is an ordinary result and
// the turn goes on.
func Yielded(tool string, result json.RawMessage) bool {
	if tool != YieldTool || len(result) == 0 {
		return false
	}
	var r struct {
		Status string `json:"status"`
	}
	return json.Unmarshal(result, &r) == nil && r.Status == "yielded"
}

// Tools executes a session tool as the turn's session. The gateway implements
// it with bus.Call and the run's token. A returned error is a thrown tool
// error (bad arguments, identity, transport); returned errors in the
// reference's sense (status "error"/"forbidden") are ordinary results.
type Tools interface {
	Call(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error)
}

// ToolsFunc adapts a function to Tools.
type ToolsFunc func(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error)

// Call calls f.
func (f ToolsFunc) Call(ctx context.Context, tool string, params json.RawMessage) (json.RawMessage, error) {
	return f(ctx, tool, params)
}

// Runtime runs turns. Implementations are safe for concurrent use: one
// Runtime serves every session of its agent.
//
// Run's error is a *RunError when the turn itself failed (its message is what
// the run record should show), or wraps ctx.Err() when ctx ended first. When
// tools were called before a failure, Run also returns a non-nil *Result
// holding those ToolCalls, so the gateway can still record them.
type Runtime interface {
	Run(ctx context.Context, t Turn, tools Tools) (*Result, error)
}

// ErrTimeout matches (errors.Is) a RunError caused by a runtime's own time
// bound (exec.timeoutSeconds, openai.timeoutSeconds), so the gateway can
// record the run as timed out rather than failed.
var ErrTimeout = errors.New("runtime timed out")

// RunError is a failed turn. Error() is exactly Message, so a scripted
// `error: "scripted failure"` reaches the run record verbatim.
type RunError struct {
	Message string
	Timeout bool
}

func (e *RunError) Error() string { return e.Message }

// Is reports ErrTimeout for timeouts.
func (e *RunError) Is(target error) bool { return target == ErrTimeout && e.Timeout }

func runErrorf(format string, args ...any) *RunError {
	return &RunError{Message: fmt.Sprintf(format, args...)}
}

// New builds the runtime agent a names. Config errors name the key, e.g.
// `agents.list[main].script.rules[2].match: invalid regexp: ...`.
func New(a config.Agent) (Runtime, error) {
	key := agentKey(a)
	if err := unusedSections(key, a); err != nil {
		return nil, err
	}
	switch kind := strings.ToLower(strings.TrimSpace(a.Runtime)); kind {
	case "", KindScript:
		return nonNil(newScript(key+".script", a.Script))
	case KindExec:
		return nonNil(newExec(key+".exec", a.Exec))
	case KindOpenAI:
		return nonNil(newOpenAI(key+".openai", a.OpenAI))
	default:
		return nil, fmt.Errorf("%s.runtime: %s is not a runtime; use script, exec or openai", key, quoteShort(a.Runtime))
	}
}

// nonNil keeps a failed constructor's typed nil pointer from becoming a
// non-nil Runtime interface.
func nonNil[R Runtime](r R, err error) (Runtime, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}

func agentKey(a config.Agent) string {
	id := strings.TrimSpace(a.ID)
	if id == "" {
		id = "?"
	}
	return "agents.list[" + id + "]"
}

// unusedSections catches a section for another runtime when runtime is left
// at its default: a user who writes `exec: {...}` but forgets `runtime: exec`
// would otherwise get the echoing script runtime and no hint why. With an
// explicit runtime, other sections are ignored, so switching is one line.
func unusedSections(key string, a config.Agent) error {
	if strings.TrimSpace(a.Runtime) != "" || len(a.Script) > 0 {
		return nil
	}
	for _, s := range []struct {
		name string
		m    map[string]any
	}{{KindExec, a.Exec}, {KindOpenAI, a.OpenAI}} {
		if len(s.m) > 0 {
			return fmt.Errorf("%s.%s is set but %s.runtime is empty (meaning script); set runtime: %s", key, s.name, key, s.name)
		}
	}
	return nil
}
