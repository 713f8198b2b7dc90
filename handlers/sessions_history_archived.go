package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// archivedHistory answers sessions_history on a key whose session is gone
// but archived (pruned by session.maintenance, deleted, archived after
// its sub-agent ended): a failure that names the archive, never an empty
// success that reads as "nothing was said". nil when the key has a live
// entry or no archive (a session not started yet reads as empty, as in
// OpenClaw).
func (d *Deps) archivedHistory(ctx context.Context, res resolved) *failure {
	if res.entry != nil || d.Lifecycle == nil || d.Lifecycle.Archives == nil {
		return nil
	}
	m, err := d.Lifecycle.Archives.Find(ctx, res.key)
	if err != nil {
		if !errors.Is(err, archives.ErrNotFound) {
			d.Log.Warn("sessions_history: archive lookup failed", "session", res.key, "err", err)
		}
		return nil
	}
	if m.Key != res.key {
		return nil // found by sessionId or archive id: another session's
	}
	// the index may lag a session created again since: the store decides
	if _, _, err := d.Store.Get(ctx, res.key); !errors.Is(err, sessions.ErrNotFound) {
		return nil
	}
	return fail("error", fmt.Sprintf(
		"Session %s has no live transcript: it was archived (%s) at %s with %d entries. Read it with `sessionbus archive get %s`, or bring it back with `sessionbus archive restore %s`.",
		res.displayKey, m.Reason, time.UnixMilli(m.At).UTC().Format(time.RFC3339), m.Entries, m.ID, m.ID))
}
