// Package watchers is the `watchers` bucket: the watch cursors of parent
// notices (docs/signals.md), one record per (watcher, target) pair, changed
// only by compare-and-set so two gateways marking the same event open one
// notice between them.
//
// Keys are `<encTarget>.=w.<encWatcher>` (bus.EncodeKey for both). An
// encoded key never has a token "=w" ('=' is always followed by two hex
// digits), so the split is unambiguous and `<encTarget>.=w.>` lists exactly
// one target's watchers, the lookup every notify-eligible append does.
// Lookups by watcher (session delete/reset) are rare and scan the bucket.
//
// A cursor's sequences are signal-log sequences:
//   - lastSeen: what the watcher has acknowledged (the notice text says
//     "changesSince <lastSeen>");
//   - notified: how far an opened notice reaches; a notice is pending while
//     notified > lastSeen, and then further material events only raise
//     material (the pending notice stays byte-stable: "frozen");
//   - material: the newest event that concerns the watcher.
//
// Cursors expire with the bucket's MaxAge (30 days): every write renews a
// key, so a cursor not updated for 30 days is gone, as in OpenClaw.
package watchers

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// Provenance of a cursor.
const (
	Explicit = "explicit" // sessions_send watch:true
	Implicit = "implicit" // spawn parent, seeded by child_spawned
)

// DefaultMaxAge expires cursors not updated for 30 days, as OpenClaw does.
const DefaultMaxAge = 30 * 24 * time.Hour

const sep = ".=w."

// Errors of Seed. Callers answer watched:false for both; neither is a thrown
// tool error in OpenClaw.
var (
	ErrSelfWatch    = errors.New("a session cannot watch itself")
	ErrNotQualified = errors.New("only agent-qualified session keys (agent:<id>:...) can watch: a bare key is ambiguous across agents")
)

// Cursor is one watch cursor.
type Cursor struct {
	Watcher          string `json:"watcherSessionKey"`
	Target           string `json:"targetSessionKey"`
	LastSeenSequence uint64 `json:"lastSeenSequence"`
	NotifiedSequence uint64 `json:"notifiedSequence"`
	MaterialSequence uint64 `json:"materialSequence"`
	Provenance       string `json:"provenance"`
	UpdatedAt        int64  `json:"updatedAt"` // unix ms
}

// Pending reports whether an opened notice awaits acknowledgement.
func (c Cursor) Pending() bool { return c.NotifiedSequence > c.LastSeenSequence }

// Notice is one notice to deliver: watcher is told target changed since
// LastSeenSequence.
type Notice struct {
	Watcher          string `json:"watcher"`
	Target           string `json:"target"`
	LastSeenSequence uint64 `json:"lastSeenSequence"`
}

// Text is OpenClaw's notice text, word for word.
func (n Notice) Text() string {
	return `Session "` + n.Target + `" changed (other actor). Reconcile before acting: session_status sessionKey "` +
		n.Target + `" changesSince ` + strconv.FormatUint(n.LastSeenSequence, 10) + `.`
}

// ContextKey dedupes the notice in the watcher's queue: one per target.
func (n Notice) ContextKey() string { return "session-state:" + hex.EncodeToString([]byte(n.Target)) }

// Qualified reports whether key can hold a cursor as watcher.
func Qualified(key string) bool {
	rest, ok := strings.CutPrefix(key, "agent:")
	return ok && strings.Contains(rest, ":") && !strings.HasPrefix(rest, ":")
}

// Store is the watchers bucket.
type Store struct {
	bus.KVConfig // recreated by bus.Guard
	b            record.Bucket[Cursor]
	now          func() time.Time
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// WithMaxAge sets how long a cursor outlives its last write, the bucket's
// TTL (0 or unset: DefaultMaxAge).
var WithMaxAge = bus.WithMaxAge

// Open creates the bucket if absent; an existing bucket keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Store, error) {
	kv, opened, err := bus.OpenBucket(ctx, js, bus.Bucket{
		Name:        names.WatchersBucket(),
		Description: "sessionbus watch cursors of parent notices (watcher -> target)",
		Ages:        true, Age: DefaultMaxAge,
	}, opts...)
	if err != nil {
		return nil, err
	}
	return &Store{KVConfig: opened, b: record.New[Cursor](kv, js, "watch cursor"), now: time.Now}, nil
}

func key(watcher, target string) string {
	return bus.EncodeKey(target) + sep + bus.EncodeKey(watcher)
}

// Seed registers watcher on target at sequence at (the target's head for an
// explicit watch, the child_spawned event for a spawn parent), so nothing
// before it ever notifies. Re-registering keeps the cursor's pending state
// (and renews it). created says whether the cursor is new.
func (s *Store) Seed(ctx context.Context, watcher, target string, at uint64, provenance string) (created bool, err error) {
	if watcher == target {
		return false, ErrSelfWatch
	}
	if !Qualified(watcher) {
		return false, fmt.Errorf("%w (got %q)", ErrNotQualified, watcher)
	}
	k := key(watcher, target)
	c := Cursor{Watcher: watcher, Target: target, LastSeenSequence: at, NotifiedSequence: at, MaterialSequence: at, Provenance: provenance, UpdatedAt: s.now().UnixMilli()}
	for range record.MaxAttempts {
		if _, err := s.b.Create(ctx, k, &c); err == nil {
			return true, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return false, fmt.Errorf("watchers: seed %s -> %s: %w", watcher, target, err)
		}
		_, _, err := s.b.Update(ctx, k, nil, 0, func(cur *Cursor) error {
			if provenance == Explicit {
				cur.Provenance = Explicit // an explicit watch outranks an implicit one
			}
			cur.UpdatedAt = s.now().UnixMilli()
			return nil
		})
		if !errors.Is(err, jetstream.ErrKeyNotFound) { // expired between the two: create again
			return false, err
		}
	}
	return false, record.ErrContended
}

// Get returns one cursor; jetstream.ErrKeyNotFound if there is none.
func (s *Store) Get(ctx context.Context, watcher, target string) (*Cursor, error) {
	c, _, err := s.b.Get(ctx, key(watcher, target))
	return c, err
}

// ForTarget lists target's cursors.
func (s *Store) ForTarget(ctx context.Context, target string) ([]Cursor, error) {
	return s.list(ctx, bus.EncodeKey(target)+sep+">")
}

// All lists every cursor (the start-up sweep re-opens pending notices from it).
func (s *Store) All(ctx context.Context) ([]Cursor, error) { return s.list(ctx, ">") }

func (s *Store) list(ctx context.Context, filter string) ([]Cursor, error) {
	w, err := s.b.KV().WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("watchers: list %s: %w", filter, err)
	}
	defer w.Stop()
	var out []Cursor
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("watchers: list %s: watch closed", filter)
			}
			if e == nil { // initial values done
				return out, nil
			}
			c, err := s.b.Decode(e.Value())
			if err != nil {
				return nil, err
			}
			out = append(out, *c)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// MarkMaterial records a notify-eligible event at seq on target for its
// cursor holders plus extra (producer-supplied) watchers, skipping the actor
// (self-suppression) and keys that are not agent-qualified. It returns the
// notices to deliver now: one per watcher that had none pending. A watcher
// with a pending notice only gets its material watermark raised; it learns of
// the event from its acknowledgement's follow-up. An extra watcher without a
// cursor gets one whose lastSeen is just before seq. Marking the same event
// again (a retry) opens nothing.
func (s *Store) MarkMaterial(ctx context.Context, target string, seq uint64, actor string, extra ...string) ([]Notice, error) {
	cursors, err := s.ForTarget(ctx, target)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	var watchers []string
	for _, c := range cursors {
		have[c.Watcher] = true
		watchers = append(watchers, c.Watcher)
	}
	for _, w := range extra {
		if !have[w] && Qualified(w) && w != target {
			have[w] = true
			if _, err := s.Seed(ctx, w, target, seq-1, Implicit); err != nil {
				return nil, err
			}
			watchers = append(watchers, w)
		}
	}
	var notices []Notice
	var errs []error
	for _, w := range watchers {
		if w == actor || !Qualified(w) {
			continue
		}
		var opened *Notice
		_, _, err := s.b.Update(ctx, key(w, target), nil, 0, func(c *Cursor) error {
			opened = nil
			if seq <= c.MaterialSequence {
				return record.ErrUnchanged
			}
			c.MaterialSequence = seq
			if c.NotifiedSequence == c.LastSeenSequence {
				c.NotifiedSequence = seq
				opened = &Notice{Watcher: w, Target: target, LastSeenSequence: c.LastSeenSequence}
			}
			c.UpdatedAt = s.now().UnixMilli()
			return nil
		})
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired or deleted meanwhile
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("watchers: mark %s -> %s: %w", w, target, err))
			continue
		}
		if opened != nil {
			notices = append(notices, *opened)
		}
	}
	return notices, errors.Join(errs...)
}

// Ack acknowledges watcher's notice about target when its turn drained it:
// lastSeen = notified. If material events arrived after the notice was
// opened, it opens exactly one follow-up, returned as a non-nil Notice.
// No cursor, or nothing pending: nil, nil.
func (s *Store) Ack(ctx context.Context, watcher, target string) (*Notice, error) {
	return s.ack(ctx, watcher, target, func(*Cursor) bool { return true })
}

// AckNotice is Ack of exactly the notice n: it acknowledges only while n
// is the pending one (the cursor's lastSeen is n's). A late or repeated
// acknowledgement of an older notice (a redelivered run, a sweep that read
// the cursor before a follow-up opened) must not acknowledge the follow-up,
// which nobody has seen yet.
func (s *Store) AckNotice(ctx context.Context, n Notice) (*Notice, error) {
	return s.ack(ctx, n.Watcher, n.Target, func(c *Cursor) bool { return c.LastSeenSequence == n.LastSeenSequence })
}

func (s *Store) ack(ctx context.Context, watcher, target string, is func(*Cursor) bool) (*Notice, error) {
	var follow *Notice
	_, _, err := s.b.Update(ctx, key(watcher, target), nil, 0, func(c *Cursor) error {
		follow = nil
		if !c.Pending() || !is(c) {
			return record.ErrUnchanged
		}
		c.LastSeenSequence = c.NotifiedSequence
		if c.MaterialSequence > c.NotifiedSequence {
			c.NotifiedSequence = c.MaterialSequence
			follow = &Notice{Watcher: watcher, Target: target, LastSeenSequence: c.LastSeenSequence}
		}
		c.UpdatedAt = s.now().UnixMilli()
		return nil
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("watchers: ack %s -> %s: %w", watcher, target, err)
	}
	return follow, nil
}

// PendingNotices lists the notices a start-up sweep re-materializes: every
// cursor with a pending notice, stated as the pending text says it.
func (s *Store) PendingNotices(ctx context.Context) ([]Notice, error) {
	all, err := s.All(ctx)
	if err != nil {
		return nil, err
	}
	var out []Notice
	for _, c := range all {
		if c.Pending() {
			out = append(out, Notice{Watcher: c.Watcher, Target: c.Target, LastSeenSequence: c.LastSeenSequence})
		}
	}
	return out, nil
}

// DeleteSession removes every cursor where key is watcher or target
// (deleting a session).
func (s *Store) DeleteSession(ctx context.Context, sessionKey string) error {
	return s.deleteWhere(ctx, func(c Cursor) bool { return c.Watcher == sessionKey || c.Target == sessionKey })
}

// DeleteWatcher removes the cursors sessionKey owns as watcher (resetting a
// session).
func (s *Store) DeleteWatcher(ctx context.Context, sessionKey string) error {
	return s.deleteWhere(ctx, func(c Cursor) bool { return c.Watcher == sessionKey })
}

func (s *Store) deleteWhere(ctx context.Context, match func(Cursor) bool) error {
	all, err := s.All(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range all {
		if match(c) {
			if err := s.b.KV().Delete(ctx, key(c.Watcher, c.Target)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
