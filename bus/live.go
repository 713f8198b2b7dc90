package bus

import "encoding/json"

// Live is the live-output subject of one encoded session key: what a turn
// of the session produces (text deltas, tool activity, its end) while it
// runs, published with core NATS and never stored.
//
// It sits under <prefix>.live, not beside the notices under
// <prefix>.session.<key>, because SB_EVENTS captures <prefix>.session.> and
// a key spans a variable number of tokens, so no subject filter could keep
// a per-key ".stream" suffix out of that stream: every delta would become
// a stored, replicated event. Nothing captures <prefix>.live.>.
func (n Names) Live(encKey string) string { return n.p() + ".live." + encKey }

// LiveAll matches the live output of every session.
func (n Names) LiveAll() string { return n.p() + ".live.>" }

// Types of a live-output message.
const (
	LiveText       = "text"
	LiveToolCall   = "tool_call"
	LiveToolResult = "tool_result"
	LiveDone       = "done"
	LiveError      = "error"
)

// LiveEvent is one live-output message. Seq counts from 1 within one
// attempt of a run: a run redelivered after its gateway died starts again
// at 1 under the same RunID, so a subscriber drops what it holds of that
// run when it sees seq 1. A tool_result says only whether the call
// succeeded: its body may hold other sessions' data, which the subscribers
// of this subject need not be allowed to read.
type LiveEvent struct {
	RunID     string          `json:"runId"`
	Seq       uint64          `json:"seq"`
	Type      string          `json:"type"`
	Delta     string          `json:"delta,omitempty"`     // text
	Tool      string          `json:"tool,omitempty"`      // tool_call, tool_result
	Arguments json.RawMessage `json:"arguments,omitempty"` // tool_call
	OK        *bool           `json:"ok,omitempty"`        // tool_result
	Reply     *string         `json:"reply,omitempty"`     // done, when the turn replied
	Error     string          `json:"error,omitempty"`     // error
}
