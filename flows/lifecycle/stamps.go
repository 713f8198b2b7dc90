package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// Stamps is a process's table of every live session's stamp, kept current
// by one long-lived watch of the sessions bucket, so a maintenance pass
// reads memory instead of the bucket. Reading and decoding every entry
// once a minute (100,000 of them at 100,000 sessions) was garbage enough
// to raise an idle process's heap goal, and its RSS with it; the table
// costs one decode per change and a few dozen bytes per session.
//
// The watch starts with the first pass that reads the table (a gateway
// that never holds the maintenance lease never pays for it) and is
// started again whenever a pass finds it ended, behind, or following a
// bucket since deleted and created again.
type Stamps struct {
	store *sessions.Store
	log   *slog.Logger

	// life serializes starting and stopping the watch.
	life    sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	created time.Time // the followed stream's creation
	stopped bool

	mu      sync.Mutex
	changed *sync.Cond
	m       map[string]stampRec
	applied uint64 // every revision up to this is in m
	ended   bool   // the watch stopped delivering
}

// stampRec is what the table holds per session: what maintenance and the
// disk budget order and protect by.
type stampRec struct {
	createdAt, updatedAt int64
	protected            bool
}

// stampWire is the part of an entry a stamp is decoded from.
type stampWire struct {
	CreatedAt int64  `json:"createdAt"`
	UpdatedAt int64  `json:"updatedAt"`
	Status    string `json:"status"`
	Pinned    bool   `json:"pinned"`
}

func (w *stampWire) stamp(key string) stamp {
	return stamp{Key: key, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Protected: w.Pinned || w.Status == "running"}
}

// stampSyncWait bounds how long a pass waits for the watch to catch up
// with the bucket before it starts the watch again, from the bucket's
// current values.
const stampSyncWait = 10 * time.Second

// NewStamps returns a table over store's bucket; nothing runs until a pass
// reads it. Stop ends its watch.
func NewStamps(store *sessions.Store, log *slog.Logger) *Stamps {
	if log == nil {
		log = slog.Default()
	}
	t := &Stamps{store: store, log: log}
	t.changed = sync.NewCond(&t.mu)
	return t
}

// Stop ends the watch; a later read starts none.
func (t *Stamps) Stop() {
	t.life.Lock()
	defer t.life.Unlock()
	t.stopped = true
	t.stopWatch()
}

// stopWatch ends the current watch and waits for its goroutine (life held).
func (t *Stamps) stopWatch() {
	if t.cancel != nil {
		t.cancel()
		<-t.done
		t.cancel, t.done = nil, nil
	}
}

// each calls fn with every stamp in the table, in no order (sync first
// for every write the bucket holds). fn runs with the table locked: it
// must not call back into it.
func (t *Stamps) each(fn func(stamp)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, r := range t.m {
		fn(stamp{Key: k, CreatedAt: r.createdAt, UpdatedAt: r.updatedAt, Protected: r.protected})
	}
}

// sync brings the table up to the bucket's last write: one status request
// when the watch is current; otherwise the watch starts again.
func (t *Stamps) sync(ctx context.Context) error {
	t.life.Lock()
	defer t.life.Unlock()
	if t.stopped {
		return errors.New("lifecycle: the session stamp table is stopped")
	}
	info, err := t.streamInfo(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	ended := t.ended
	t.mu.Unlock()
	if t.cancel != nil && !ended && info.Created.Equal(t.created) {
		wctx, cancel := context.WithTimeout(ctx, stampSyncWait)
		err := t.waitApplied(wctx, info.State.LastSeq)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		t.log.Warn("lifecycle: the session stamp table fell behind the bucket; reading the bucket again", "err", err)
	}
	return t.restart(ctx, info)
}

func (t *Stamps) streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	st, err := t.store.KV().Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: sessions bucket status: %w", err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil, fmt.Errorf("lifecycle: sessions bucket status of type %T carries no stream info", st)
	}
	return bs.StreamInfo(), nil
}

// restart empties the table and follows the bucket again from its
// current values (life held). The watch's consumer is created after info
// was read, so once its initial values are in, every write up to
// info's last sequence is.
func (t *Stamps) restart(ctx context.Context, info *jetstream.StreamInfo) error {
	t.stopWatch()
	t.mu.Lock()
	t.m, t.applied, t.ended = make(map[string]stampRec), 0, false
	t.mu.Unlock()
	wctx, cancel := context.WithCancel(context.Background())
	w, err := t.store.KV().WatchAll(wctx)
	if err != nil {
		cancel()
		return fmt.Errorf("lifecycle: watch the sessions bucket: %w", err)
	}
	ready, done := make(chan struct{}), make(chan struct{})
	t.cancel, t.done, t.created = cancel, done, info.Created
	go t.follow(wctx, w, ready, done)
	select {
	case <-ready:
	case <-ctx.Done():
		t.stopWatch()
		return ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return errors.New("lifecycle: the sessions watch ended early")
	}
	t.applied = max(t.applied, info.State.LastSeq)
	t.changed.Broadcast()
	return nil
}

func (t *Stamps) follow(ctx context.Context, w jetstream.KeyWatcher, ready, done chan struct{}) {
	defer close(done)
	record.Follow(ctx, w, ready, t.apply)
	t.mu.Lock()
	t.ended = true
	t.changed.Broadcast()
	t.mu.Unlock()
}

// apply files one change of the bucket.
func (t *Stamps) apply(ke jetstream.KeyValueEntry) {
	key, err := bus.DecodeKey(ke.Key())
	var w stampWire
	put := err == nil && ke.Operation() == jetstream.KeyValuePut
	if put {
		if err := json.Unmarshal(ke.Value(), &w); err != nil {
			t.log.Warn("lifecycle: a session entry does not decode; left alone", "key", key, "err", err)
			put = false
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case put:
		s := w.stamp(key)
		t.m[key] = stampRec{createdAt: s.CreatedAt, updatedAt: s.UpdatedAt, protected: s.Protected}
	case err == nil:
		delete(t.m, key) // deleted or purged, or no longer decodes
	}
	t.applied = max(t.applied, ke.Revision())
	t.changed.Broadcast()
}

// waitApplied waits until the table holds revision rev.
func (t *Stamps) waitApplied(ctx context.Context, rev uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := record.WaitFor(ctx, t.changed, func() bool { return t.applied >= rev }, func() error {
		if t.ended {
			return errors.New("lifecycle: the sessions watch ended")
		}
		return nil
	})
	if err != nil && err == ctx.Err() {
		return fmt.Errorf("session stamp table behind (at %d, want %d): %w", t.applied, rev, err)
	}
	return err
}
