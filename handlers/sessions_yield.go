package handlers

import (
	"context"
	"strings"

	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/rules"
)

// sessions_yield texts, OpenClaw's.
const (
	yieldDefaultMessage  = "Turn yielded."
	errYieldNoSession    = "No session context"
	errYieldNotSupported = "Yield not supported in this context"
)

type yieldResult = schema.SessionsYieldResult

// sessionsYield accepts the caller's request to end its turn. The worker
// only answers; the runtime that made the call ends the turn when it sees
// status "yielded" (gateway/runtime: Result.Yielded), so the session's next
// message (a child's completion announce, already queued as a run in the
// session's lane, or the next inbound event) starts the next turn. A yield
// never waits for anything.
//
// When each error applies (there is no in-process run to ask, so the
// caller's verified token decides):
//   - "No session context": the token names no session (a blank subject).
//   - "Yield not supported in this context": the token names a session but
//     no run, i.e. an external client (`sessionbus call`, an exec harness
//     outside a gateway turn): it has no turn a yield could end.
func sessionsYield(_ context.Context, _ *Deps, r *requester, p rules.Params) (any, error) {
	msg, _, err := p.String("message")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(r.callerKey) == "" {
		return &yieldResult{Status: "error", Error: errYieldNoSession}, nil
	}
	if r.runID == "" {
		return &yieldResult{Status: "error", Error: errYieldNotSupported}, nil
	}
	if msg == "" {
		msg = yieldDefaultMessage
	}
	return &yieldResult{Status: "yielded", Message: msg}, nil
}
