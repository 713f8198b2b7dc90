// Package transcriptstest reads a session's transcript for tests in several
// packages. Production code never imports it.
package transcriptstest

import (
	"encoding/json"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Transcript returns the newest limit entries of session's transcript,
// oldest first, each decoded from JSON into a T (a map for a test that
// looks at any field, a struct for one that wants a few). It fails the test
// when the read or a decode fails.
func Transcript[T any](t testing.TB, tr *transcripts.Store, session string, limit int) []T {
	t.Helper()
	entries, _, err := tr.Tail(bustest.Context(t), bus.EncodeKey(session), limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]T, len(entries))
	for i, e := range entries {
		if err := json.Unmarshal(e.Data, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
