// Package testkit holds the helpers that tests in several packages share:
// reading a session's transcript, waiting for a run to end, catching a run
// the moment it is recorded running, and matching a thrown bus error.
//
// It imports only bus, bus/bustest and the stores it reads (kv/runs,
// streams/transcripts), so that the internal tests of gateway, lifecycle
// and handlers can use it; a helper that needs one of those packages goes
// into a subpackage (handlerstest, gatewaytest).
package testkit

import "github.com/sessionbus/sessionbus/bus"

// IsCode reports whether err is a thrown *bus.Error with code.
func IsCode(err error, code int) bool {
	e, ok := bus.AsError(err)
	return ok && e.Code == code
}
