package cron

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
)

// reaperClaim is the lease one reaper pass holds in the claims bucket.
const reaperClaim = "cron.reaper"

// Reaper removes isolated cron run sessions
// (agent:<id>:cron:<jobId>:run:<runId>) not updated for Retention, each
// through lifecycle's Delete: its transcript archived first, as OpenClaw's
// reaper archives a removed run's transcript. Retention is
// session.maintenance.resetArchiveRetention (OpenClaw's cron reaper
// follows that knob); 0 keeps them. The job's own session stays.
type Reaper struct {
	Life      *lifecycle.Ops
	Retention time.Duration
	Now       func() time.Time
}

// Run is one pass; it returns the keys it removed.
func (r *Reaper) Run(ctx context.Context) ([]string, error) {
	if r.Retention <= 0 {
		return nil, nil
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	cutoff := now.Add(-r.Retention).UnixMilli()
	due, err := r.runKeys(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, key := range due {
		e, _, err := r.Life.Sessions.Get(ctx, key)
		if errors.Is(err, sessions.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e.Pinned || max(e.UpdatedAt, e.CreatedAt) >= cutoff {
			continue
		}
		if _, err := r.Life.Delete(ctx, key, archives.ReasonDeleted, nil); err != nil {
			errs = append(errs, fmt.Errorf("reap %s: %w", key, err))
			continue
		}
		removed = append(removed, key)
	}
	return removed, errors.Join(errs...)
}

// runKeys are the cron run sessions' keys: from the gateway's stamp table
// when it keeps one (a pass then reads nothing of the bucket), else from a
// listing of every key.
func (r *Reaper) runKeys(ctx context.Context) ([]string, error) {
	due, ok, err := r.Life.TableKeys(ctx, rules.IsCronRunKey)
	if ok || err != nil {
		return due, err
	}
	keys, err := r.Life.Sessions.KV().ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("cron reaper: list sessions: %w", err)
	}
	for enc := range keys.Keys() {
		key, err := bus.DecodeKey(enc)
		if err != nil || !rules.IsCronRunKey(key) {
			continue
		}
		due = append(due, key)
	}
	return due, nil
}

// RunLeased runs a pass unless another process ran one within every:
// every gateway's sweep calls it, the lease lets one of them work.
func (r *Reaper) RunLeased(ctx context.Context, holder string, every time.Duration) ([]string, error) {
	if r.Retention <= 0 {
		return nil, nil
	}
	if r.Life.Claims == nil {
		return nil, errors.New("cron reaper: needs the claims bucket for its lease")
	}
	if _, err := r.Life.Claims.Take(ctx, reaperClaim, holder, every); errors.Is(err, claims.ErrTaken) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return r.Run(ctx)
}
