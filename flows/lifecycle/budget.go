package lifecycle

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/archives"
)

// Budget is the disk budget's state (session.maintenance.maxDiskBytes):
// what archives and live transcripts hold against the limit.
type Budget struct {
	Enabled bool  `json:"enabled"` // false: the configured value is malformed
	Limit   int64 `json:"limit"`
	// Used is Archives.Compressed + LiveBytes: what eviction compares
	// with Limit.
	Used      int64          `json:"used"`
	Archives  archives.Usage `json:"archives"`
	LiveBytes int64          `json:"liveBytes"` // SB_TRANSCRIPTS on disk
	Over      bool           `json:"over"`
}

// Line is the one-line summary `archive ls` prints on stderr.
func (b *Budget) Line() string {
	if !b.Enabled {
		return fmt.Sprintf("disk budget DISABLED (session.maintenance.maxDiskBytes is malformed): %d archives, %d bytes compressed, live transcripts %d bytes",
			b.Archives.Archives, b.Archives.Compressed, b.LiveBytes)
	}
	return fmt.Sprintf("disk budget %d bytes: used %d (%.1f%%) = %d archives (%d bytes compressed, %d pending) + live transcripts %d bytes",
		b.Limit, b.Used, 100*float64(b.Used)/float64(max(b.Limit, 1)), b.Archives.Archives, b.Archives.Compressed, b.Archives.Pending, b.LiveBytes)
}

// State measures the budget; limit and enabled are config.DiskBudget's.
func (o *Ops) State(ctx context.Context, limit int64, enabled bool) (*Budget, []*archives.Meta, error) {
	u, all, err := o.Archives.Usage(ctx)
	if err != nil {
		return nil, nil, err
	}
	live, err := o.liveBytes(ctx)
	if err != nil {
		return nil, nil, err
	}
	b := &Budget{Enabled: enabled, Limit: limit, Archives: u, LiveBytes: live, Used: u.Compressed + live}
	b.Over = enabled && b.Used > limit
	return b, all, nil
}

func (o *Ops) liveBytes(ctx context.Context) (int64, error) {
	if o.JS == nil {
		return 0, errors.New("lifecycle: no JetStream handle to measure live transcripts")
	}
	s, err := o.JS.Stream(ctx, o.Transcripts.StreamName())
	if err != nil {
		return 0, fmt.Errorf("measure live transcripts: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("measure live transcripts: %w", err)
	}
	return int64(info.State.Bytes), nil
}

// Evicted is one thing Enforce removed.
type Evicted struct {
	Kind  string `json:"kind"` // archive | session
	ID    string `json:"id"`   // archive id, or session key
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"`
}

// Enforce brings the used bytes, once over limit, down to target
// (highWaterBytes, at most limit): the oldest archives go first
// (an archive whose operation is pending never goes: it is that
// operation's record); only when no archive is left, the least recently
// updated live sessions are deleted, each through Delete (archived, then
// its archive evicted in turn). Every eviction is logged at WARN.
func (o *Ops) Enforce(ctx context.Context, limit, target int64) ([]Evicted, error) {
	var out []Evicted
	var live []stamp // loaded when first needed
	target = min(max(target, 0), limit)
	for range 100_000 {
		// the sums and the oldest done archive, not the whole list: this
		// runs every minute over every archive
		u, oldest, err := o.Archives.Tally(ctx)
		if err != nil {
			return out, err
		}
		live0, err := o.liveBytes(ctx)
		if err != nil {
			return out, err
		}
		b := &Budget{Enabled: true, Limit: limit, Archives: u, LiveBytes: live0, Used: u.Compressed + live0}
		b.Over = b.Used > limit
		if (len(out) == 0 && !b.Over) || b.Used <= target {
			return out, nil
		}
		if m := oldest; m != nil {
			if err := o.Archives.Delete(ctx, m.ID); err != nil {
				return out, fmt.Errorf("evict archive %s: %w", m.ID, err)
			}
			o.log().Warn("disk budget: evicted the oldest archive", "archive", m.ID, "key", m.Key, "reason", m.Reason,
				"entries", m.Entries, "bytes", m.Compressed, "used", b.Used, "limit", limit)
			out = append(out, Evicted{Kind: "archive", ID: m.ID, Key: m.Key, Bytes: m.Compressed})
			continue
		}
		if live == nil {
			if live, err = o.allStamps(ctx); err != nil {
				return out, err
			}
		}
		if len(live) == 0 {
			o.log().Warn("disk budget: over the limit with nothing left to evict", "used", b.Used, "limit", limit, "pending", b.Archives.Pending)
			return out, nil
		}
		e := live[0]
		live = live[1:]
		res, err := o.Delete(ctx, e.Key, archives.ReasonDeleted, nil)
		if err != nil {
			return out, fmt.Errorf("evict session %s: %w", e.Key, err)
		}
		o.log().Warn("disk budget: no archive left; evicted the least recently updated live session", "key", e.Key,
			"sessionId", res.SessionID, "updatedAt", e.UpdatedAt, "entries", res.Entries, "used", b.Used, "limit", limit)
		out = append(out, Evicted{Kind: "session", ID: e.Key, Key: e.Key, Bytes: res.Bytes})
	}
	return out, errors.New("disk budget: eviction did not converge")
}

// stamp is what maintenance and the disk budget read of a live entry:
// which it is, how recently it was updated and whether it is protected.
// A whole Entry for each of 100,000 sessions, held for a pass every
// minute, was most of what a gateway's heap grew by while idle.
type stamp struct {
	Key                  string
	CreatedAt, UpdatedAt int64
	// Protected sessions are never pruned or capped: pinned ones, and
	// those an OpenClaw store marks running. (A session whose turn is
	// writing its transcript fails its archive step and is left for a
	// later pass.)
	Protected bool
}

// byUpdate orders stamps least recently updated first, then by key.
func byUpdate(a, b stamp) int {
	return cmp.Or(cmp.Compare(a.UpdatedAt, b.UpdatedAt), cmp.Compare(a.Key, b.Key))
}

// stamps returns a walk over every live session's stamp, in no order,
// that the caller may take as often as it needs within one pass: over the
// process's table when it keeps one (Ops.Stamps), else over the bucket
// read once here.
func (o *Ops) stamps(ctx context.Context) (func(func(stamp)), error) {
	if o.Stamps != nil {
		if err := o.Stamps.sync(ctx); err != nil {
			return nil, err
		}
		return o.Stamps.each, nil
	}
	all, err := o.readStamps(ctx)
	if err != nil {
		return nil, err
	}
	return func(fn func(stamp)) {
		for _, e := range all {
			fn(e)
		}
	}, nil
}

// TableKeys returns the keys of the live sessions match accepts, read from
// the process's stamp table; ok is false when the process keeps none
// (Ops.Stamps nil), and the caller reads the bucket instead.
func (o *Ops) TableKeys(ctx context.Context, match func(key string) bool) (keys []string, ok bool, err error) {
	if o.Stamps == nil {
		return nil, false, nil
	}
	if err := o.Stamps.sync(ctx); err != nil {
		return nil, true, err
	}
	o.Stamps.each(func(e stamp) {
		if match(e.Key) {
			keys = append(keys, e.Key)
		}
	})
	return keys, true, nil
}

// allStamps is every live session's stamp, least recently updated first.
func (o *Ops) allStamps(ctx context.Context) ([]stamp, error) {
	each, err := o.stamps(ctx)
	if err != nil {
		return nil, err
	}
	var out []stamp
	each(func(e stamp) { out = append(out, e) })
	slices.SortFunc(out, byUpdate)
	return out, nil
}

// readStamps reads every live entry's stamp in one watch of the bucket:
// its current values arrive pipelined, not one request each (10,000
// sessions take one pass, not 10,000 round trips).
func (o *Ops) readStamps(ctx context.Context) ([]stamp, error) {
	w, err := o.Sessions.KV().WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var out []stamp
	for {
		var kve jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case v, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("lifecycle: the sessions watch ended early")
			}
			kve = v
		}
		if kve == nil {
			return out, nil // every current value delivered
		}
		key, err := bus.DecodeKey(kve.Key())
		if err != nil {
			continue
		}
		var e stampWire
		if err := json.Unmarshal(kve.Value(), &e); err != nil {
			o.log().Warn("lifecycle: a session entry does not decode; left alone", "key", key, "err", err)
			continue
		}
		out = append(out, e.stamp(key))
	}
}
