package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// Finish completes the operations a stopped process left half done: every
// pending archive older than PendingGrace. It returns how many it
// completed. Safe to run in many processes at once: every step is
// idempotent.
func (o *Ops) Finish(ctx context.Context) (int, error) {
	grace := o.PendingGrace
	if grace == 0 {
		grace = DefaultPendingGrace
	}
	now := o.now().UnixMilli()
	// only the pending archives are kept from the pass (it runs every
	// minute over every archive), oldest first as List gives them
	var pending []*archives.Meta
	if err := o.Archives.Each(ctx, func(m *archives.Meta) {
		if m.State == archives.StatePending && now-m.At >= grace.Milliseconds() {
			pending = append(pending, m)
		}
	}); err != nil {
		return 0, err
	}
	slices.SortStableFunc(pending, func(a, b *archives.Meta) int { return cmp.Compare(a.At, b.At) })
	n := 0
	var errs []error
	for _, m := range pending {
		release, err := o.lock(ctx, m.Key, "finish")
		if err != nil {
			continue // its operation is at work, or another sweep is
		}
		err = o.finishOne(ctx, m)
		release()
		if err != nil {
			errs = append(errs, fmt.Errorf("finish %s of %s (archive %s): %w", opOf(m.Reason), m.Key, m.ID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func opOf(reason string) string {
	if reason == archives.ReasonReset {
		return "reset"
	}
	return "delete"
}

// finishOne decides from what is left where the operation of m stopped.
func (o *Ops) finishOne(ctx context.Context, m *archives.Meta) error {
	op := opOf(m.Reason)
	e, _, err := o.Sessions.Get(ctx, m.Key)
	if err != nil && !errors.Is(err, sessions.ErrNotFound) {
		return err
	}
	ours := e != nil && e.SessionID == m.SessionID
	if m.Digest == "" {
		// stopped while writing the archive: nothing was removed, and the
		// incomplete archive holds nothing anyone needs
		if ours {
			if _, err := o.runLocked(ctx, m.Key, m.Reason, op, nil); err != nil {
				return err
			}
		}
		o.log().Info("lifecycle: removing an archive whose write never completed", "archive", m.ID, "key", m.Key)
		return o.Archives.Delete(ctx, m.ID)
	}
	if !ours {
		// the entry step ran (deleted, or given a new sessionId), or the
		// key belongs to a newer session: nothing of this one is left
		return o.Archives.SetState(ctx, m.ID, archives.StateDone)
	}
	n, err := o.Transcripts.Count(ctx, bus.EncodeKey(m.Key))
	if err != nil {
		return err
	}
	if n != 0 && n != uint64(m.Entries) {
		// entries were appended after the archive was written (or after
		// its transcript step): archive the session again, whole, and
		// keep this archive too, done
		if _, err := o.runLocked(ctx, m.Key, m.Reason, op, nil); err != nil {
			return err
		}
		return o.Archives.SetState(ctx, m.ID, archives.StateDone)
	}
	_, err = o.remove(ctx, m, op)
	return err
}
