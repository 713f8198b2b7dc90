package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/claims"
)

// Maintenance is session.maintenance's entry and archive policy (the disk
// budget is Enforce's).
type Maintenance struct {
	Enforce    bool          // false: warn mode, report and change nothing
	PruneAfter time.Duration // entries not updated for this long are stale
	MaxEntries int
	// ArchiveRetention is how long reset and delete archives stay; 0
	// keeps them (the disk budget still bounds them).
	ArchiveRetention time.Duration
}

// MaintenanceFrom is the policy of a validated config.
func MaintenanceFrom(m config.Maintenance) Maintenance {
	ret, _ := m.ArchiveRetention()
	return Maintenance{Enforce: m.Mode != config.MaintenanceWarn, PruneAfter: m.PruneAge(), MaxEntries: m.MaxEntries, ArchiveRetention: ret}
}

// What maintenance does to one thing.
const (
	ActionPrune   = "prune"   // an entry past pruneAfter: archived, then deleted
	ActionCap     = "cap"     // an entry over maxEntries (least recently updated first)
	ActionArchive = "archive" // a reset or delete archive past resetArchiveRetention
)

// Action is one thing a maintenance pass did, or in warn mode would do.
type Action struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
	ID   string `json:"id,omitempty"` // the archive, for ActionArchive
	// At is the entry's updatedAt, or when the archive was written.
	At      int64 `json:"at"`
	Applied bool  `json:"applied"`
}

// Report is one maintenance pass.
type Report struct {
	Enforce bool     `json:"enforce"`
	Actions []Action `json:"actions"`
}

// Maintain runs one pass, oldest first: entries not updated within
// PruneAfter are pruned, then the least recently updated entries over
// MaxEntries, each through Delete (its transcript archived and verified
// first, reason deleted); then reset and delete archives older than
// ArchiveRetention go. Protected sessions (protected) are never pruned. In
// warn mode every action is logged at WARN and nothing changes.
func (o *Ops) Maintain(ctx context.Context, p Maintenance) (*Report, error) {
	now := o.now()
	entries, err := o.allStamps(ctx) // least recently updated first
	if err != nil {
		return nil, err
	}
	var todo []Action
	cutoff := now.Add(-p.PruneAfter).UnixMilli()
	live := 0
	for _, e := range entries {
		at := first64(e.UpdatedAt, e.CreatedAt)
		if at != 0 && at < cutoff && !protected(e) {
			todo = append(todo, Action{Kind: ActionPrune, Key: e.Key, At: at})
			continue
		}
		live++
	}
	for _, e := range entries {
		if live <= p.MaxEntries {
			break
		}
		at := first64(e.UpdatedAt, e.CreatedAt)
		if (at != 0 && at < cutoff) || protected(e) {
			continue // pruned above, or kept
		}
		todo = append(todo, Action{Kind: ActionCap, Key: e.Key, At: at})
		live--
	}
	if p.ArchiveRetention > 0 {
		old := now.Add(-p.ArchiveRetention).UnixMilli()
		var expired []Action
		if err := o.Archives.Each(ctx, func(m *archives.Meta) {
			if (m.Reason == archives.ReasonReset || m.Reason == archives.ReasonDeleted) && m.State == archives.StateDone && m.At < old {
				expired = append(expired, Action{Kind: ActionArchive, Key: m.Key, ID: m.ID, At: m.At})
			}
		}); err != nil {
			return nil, err
		}
		slices.SortStableFunc(expired, func(a, b Action) int { return cmp.Or(cmp.Compare(a.At, b.At), strings.Compare(a.ID, b.ID)) })
		todo = append(todo, expired...)
	}
	rep := &Report{Enforce: p.Enforce, Actions: todo}
	var errs []error
	for i := range rep.Actions {
		a := &rep.Actions[i]
		if !p.Enforce {
			o.log().Warn("session maintenance (warn mode): would "+a.Kind, "key", a.Key, "archive", a.ID, "at", time.UnixMilli(a.At).UTC().Format(time.RFC3339))
			continue
		}
		if err := o.apply(ctx, a); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", a.Kind, a.Key, err))
			continue
		}
		a.Applied = true
		o.log().Info("session maintenance: "+a.Kind, "key", a.Key, "archive", a.ID, "at", time.UnixMilli(a.At).UTC().Format(time.RFC3339))
	}
	return rep, errors.Join(errs...)
}

func (o *Ops) apply(ctx context.Context, a *Action) error {
	if a.Kind == ActionArchive {
		return o.Archives.Delete(ctx, a.ID)
	}
	res, err := o.Delete(ctx, a.Key, archives.ReasonDeleted, nil)
	if err == nil {
		a.ID = res.ArchiveID
	}
	return err
}

// protected sessions are never pruned or capped: pinned ones, and those an
// OpenClaw store marks running. (A session whose turn is writing its
// transcript fails its archive step and is left for a later pass.)
func protected(e stamp) bool {
	return e.Pinned || e.Status == "running"
}

// maintenanceClaim is the lease one maintenance pass holds in the claims
// bucket.
const maintenanceClaim = "lifecycle.maintenance"

// MaintainLeased runs Maintain unless another process ran it within the
// last every: each gateway's sweep calls it, and the lease (a claim whose
// TTL is every, never released) lets one pass run per interval across
// them all. It reports whether this process ran it.
func (o *Ops) MaintainLeased(ctx context.Context, holder string, every time.Duration, p Maintenance) (*Report, bool, error) {
	if o.Claims == nil {
		return nil, false, errors.New("lifecycle: maintenance needs the claims bucket for its lease")
	}
	if _, err := o.Claims.Take(ctx, maintenanceClaim, holder, every); errors.Is(err, claims.ErrTaken) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	rep, err := o.Maintain(ctx, p)
	return rep, true, err
}
