package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// busyError is the refusal of an operation on a session another one holds.
type busyError struct{ err error }

func (b *busyError) Error() string { return b.err.Error() }
func (b *busyError) Unwrap() error { return b.err }

// staleResetWait bounds how long ResetStale waits for another process's
// operation on the same session (most likely the same reset, found by a
// message that arrived at another worker at the same moment).
const staleResetWait = 10 * time.Second

// ResetStale resets the session under key if it is still the incarnation
// staleID: the expiry a reset policy found when a human message arrived.
// It returns nil when there was nothing to do (another process reset it
// first, or the session is gone). The reset is Reset's: the transcript
// archived (reason reset) and verified before anything is removed, so a
// crash leaves a pending archive the next sweep finishes, never a
// half-reset session.
func (o *Ops) ResetStale(ctx context.Context, key, staleID string) (*Result, error) {
	deadline := time.Now().Add(staleResetWait)
	wait := 20 * time.Millisecond
	for {
		release, err := o.lock(ctx, key, "reset")
		var busy *busyError
		if errors.As(err, &busy) && time.Now().Before(deadline) {
			if err := bus.Sleep(ctx, wait); err != nil {
				return nil, err
			}
			wait = min(2*wait, 500*time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		res, err := o.resetIf(ctx, key, staleID)
		release()
		return res, err
	}
}

func (o *Ops) resetIf(ctx context.Context, key, staleID string) (*Result, error) {
	e, _, err := o.Sessions.Get(ctx, key)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if e.SessionID != staleID {
		return nil, nil // reset already, by whoever held the lock
	}
	// OpenClaw carries a session's model and thinking overrides across an
	// explicit /new or /reset only: an expired session starts from the
	// configured defaults. Cleared before the reset, on the expired
	// incarnation, so a reset a crash stopped (finished by a sweep) ends
	// the same way.
	if _, _, err := o.Sessions.Update(ctx, key, func(x *sessions.Entry) error {
		r := x.Rares()
		if x.SessionID != staleID || (r.ModelOverride == "" && r.ProviderOverride == "" && r.ThinkingLevel == "") {
			return record.ErrUnchanged
		}
		x.SetRare(func(r *sessions.RareFields) { r.ModelOverride, r.ProviderOverride, r.ThinkingLevel = "", "", "" })
		return nil
	}); err != nil && !errors.Is(err, sessions.ErrNotFound) {
		return nil, fmt.Errorf("reset %s: clear its model override: %w", key, err)
	}
	return o.runLocked(ctx, key, archives.ReasonReset, "reset", nil)
}
