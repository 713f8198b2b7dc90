package lifecycle

import (
	"testing"

	"github.com/sessionbus/sessionbus/kv/archives"
)

// TestArchiveKeysWithSlashes: Google Chat and Signal keys ("/", "+", "=")
// archive on reset and on delete, and their archives hold the transcript.
func TestArchiveKeysWithSlashes(t *testing.T) {
	e := newEnv(t)
	for _, key := range []string{"agent:main:googlechat:group:spaces/AAAA:thread:spaces/AAAA/threads/x", "agent:main:signal:group:q1W2+/e3="} {
		old, entries := e.session(key, 30, 1)
		if _, err := e.ops.Reset(e.ctx, key, nil); err != nil {
			t.Fatalf("reset %s: %v", key, err)
		}
		e.wasReset(key, old)
		e.archived(key, old.SessionID, archives.ReasonReset, entries)

		gone := key + ":gone"
		old, entries = e.session(gone, 20, 1)
		if _, err := e.ops.Delete(e.ctx, gone, archives.ReasonDeleted, nil); err != nil {
			t.Fatalf("delete %s: %v", gone, err)
		}
		e.deleted(gone)
		e.archived(gone, old.SessionID, archives.ReasonDeleted, entries)
	}
}
