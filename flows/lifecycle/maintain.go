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
// ArchiveRetention go. Protected sessions (stamp.Protected) are never
// pruned or capped. In warn mode nothing changes: the report holds every
// action the pass would take, and one WARN line sums them up.
func (o *Ops) Maintain(ctx context.Context, p Maintenance) (*Report, error) {
	now := o.now()
	each, err := o.stamps(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-p.PruneAfter).UnixMilli()
	stale := func(e stamp) bool {
		at := first64(e.UpdatedAt, e.CreatedAt)
		return at != 0 && at < cutoff
	}
	// a pass over an idle store with nothing to do allocates nothing: the
	// entries to act on are collected, not every entry
	var prune, capped []stamp
	live := 0
	each(func(e stamp) {
		if stale(e) && !e.Protected {
			prune = append(prune, e)
			return
		}
		live++
	})
	if over := live - p.MaxEntries; over > 0 {
		each(func(e stamp) {
			if !stale(e) && !e.Protected {
				capped = append(capped, e)
			}
		})
		slices.SortFunc(capped, byUpdate)
		capped = capped[:min(over, len(capped))]
	}
	slices.SortFunc(prune, byUpdate)
	todo := make([]Action, 0, len(prune)+len(capped))
	for _, e := range prune {
		todo = append(todo, Action{Kind: ActionPrune, Key: e.Key, At: first64(e.UpdatedAt, e.CreatedAt)})
	}
	for _, e := range capped {
		todo = append(todo, Action{Kind: ActionCap, Key: e.Key, At: first64(e.UpdatedAt, e.CreatedAt)})
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
	if !p.Enforce {
		o.warnPass(rep.Actions)
		return rep, nil
	}
	var errs []error
	for i := range rep.Actions {
		a := &rep.Actions[i]
		if err := o.apply(ctx, a); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", a.Kind, a.Key, err))
			continue
		}
		a.Applied = true
		o.log().Info("session maintenance: "+a.Kind, "key", a.Key, "archive", a.ID, "at", time.UnixMilli(a.At).UTC().Format(time.RFC3339))
	}
	return rep, errors.Join(errs...)
}

// warnOldest is how many actions of each kind a warn-mode pass names.
const warnOldest = 5

// warnPass logs what a warn-mode pass would have done as one WARN line:
// how many actions of each kind, and the oldest few of each. A line per
// action was 95,000 lines a minute at 100,000 sessions and the default
// maxEntries, repeated every pass while nothing changed.
func (o *Ops) warnPass(todo []Action) {
	if len(todo) == 0 {
		return
	}
	// todo holds each kind's actions together, oldest first
	attrs := []any{}
	for start := 0; start < len(todo); {
		kind := todo[start].Kind
		end := start
		for end < len(todo) && todo[end].Kind == kind {
			end++
		}
		var oldest []string
		for _, a := range todo[start:min(end, start+warnOldest)] {
			name := a.Key
			if a.ID != "" {
				name += " (archive " + a.ID + ")"
			}
			oldest = append(oldest, name+" at "+time.UnixMilli(a.At).UTC().Format(time.RFC3339))
		}
		attrs = append(attrs, kind, end-start, kind+"Oldest", strings.Join(oldest, ", "))
		start = end
	}
	o.log().Warn("session maintenance (warn mode): nothing changed; mode enforce would take these actions", attrs...)
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
