// Package childslots is the `childslots` bucket: the fleet-wide bound on
// running sub-agent runs (agents.defaults.subagents.maxConcurrent). The
// bound is a fixed set of keys, slot.0 … slot.<max-1>; a child's run holds
// one from before it starts until its outcome is recorded, so however many
// gateways share the run queue, no more than max children run at once.
//
// A held slot is a lease the server times, as a session lane is: every
// write of a held slot carries a per-message TTL, refreshed while the run
// goes on, so the slot of a gateway that died is freed by the server one
// lease after its last refresh, without any gateway comparing clocks. A
// freed slot is written back empty (no TTL) rather than deleted, so the
// next taker compare-and-sets against the revision it sees: one write.
//
// Each gateway follows the bucket with a watcher, so it knows which slots
// look free without reading them: taking one costs one write, and a run
// that would find every slot taken is turned away before it writes
// anything.
package childslots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// ErrFull means every slot is held by another run.
var ErrFull = errors.New("every sub-agent slot is taken")

// holder is the value of a slot key; an empty one is a free slot.
type holder struct {
	RunID   string `json:"runId,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

var free = []byte(`{}`)

// seen is what the watcher last saw of a slot key.
type seen struct {
	rev   uint64
	runID string    // "" free
	at    time.Time // when this gateway saw the write (its own clock only)
}

// Slots is the bucket as one gateway (owner) sees it.
type Slots struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	names    bus.Names
	replicas int
	owner    string
	lease    time.Duration
	max      int

	mu    sync.Mutex
	view  map[string]seen
	stop  context.CancelFunc
	watch jetstream.KeyWatcher
	done  chan struct{}
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// Bucket is the bucket's name under names.
func Bucket(names bus.Names) string { return names.Bucket("childslots") }

// Open creates the bucket if absent (turning on per-message TTLs) and
// starts following it. n is the number of slots (at least 1); lease how
// long a held slot outlives its last refresh (at least a second, the
// server's TTL resolution).
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, owner string, n int, lease time.Duration, opts ...Option) (*Slots, error) {
	o := bus.ApplyStoreOptions(opts)
	if lease < time.Second {
		return nil, fmt.Errorf("child slot lease %s is shorter than 1s", lease)
	}
	s := &Slots{js: js, names: names, replicas: o.Replicas, owner: owner, lease: lease, max: max(n, 1), view: map[string]seen{}}
	var err error
	if s.kv, err = s.ensure(ctx); err != nil {
		return nil, err
	}
	if err := s.follow(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Slots) ensure(ctx context.Context) (jetstream.KeyValue, error) {
	kv, _, err := bus.OpenKV(ctx, s.js, jetstream.KeyValueConfig{
		Bucket:      Bucket(s.names),
		Description: "sessionbus sub-agent run slots (agents.defaults.subagents.maxConcurrent; held slots expire by server TTL)",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(s.replicas, 1),
	})
	if err != nil {
		return nil, err
	}
	st, err := s.js.Stream(ctx, bus.KVStream(kv.Bucket()))
	if err != nil {
		return nil, fmt.Errorf("child slots bucket stream: %w", err)
	}
	if cfg := st.CachedInfo().Config; !cfg.AllowMsgTTL {
		cfg.AllowMsgTTL = true
		if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("child slots bucket %s needs per-message TTL (allow_msg_ttl, nats-server 2.11 or later): %w", kv.Bucket(), err)
		}
	}
	return kv, nil
}

// follow starts the watcher and waits until it has delivered the slots
// as they are now.
func (s *Slots) follow(ctx context.Context) error {
	wctx, stop := context.WithCancel(context.Background())
	w, err := s.kv.WatchAll(wctx)
	if err != nil {
		stop()
		return fmt.Errorf("watch child slots: %w", err)
	}
	s.stop, s.watch, s.done = stop, w, make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(s.done)
		initial := true
		for e := range w.Updates() {
			if e == nil {
				if initial {
					initial = false
					close(ready)
				}
				continue
			}
			s.apply(e)
		}
	}()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		s.Stop()
		return fmt.Errorf("watch child slots: %w", ctx.Err())
	}
}

func (s *Slots) apply(e jetstream.KeyValueEntry) {
	v := seen{rev: e.Revision(), at: time.Now()}
	if e.Operation() == jetstream.KeyValuePut {
		var h holder
		_ = json.Unmarshal(e.Value(), &h)
		v.runID = h.RunID
	}
	s.mu.Lock()
	if cur, ok := s.view[e.Key()]; !ok || cur.rev < v.rev {
		s.view[e.Key()] = v
	}
	s.mu.Unlock()
}

// Stop ends the watcher.
func (s *Slots) Stop() {
	if s == nil || s.stop == nil {
		return
	}
	s.stop()
	_ = s.watch.Stop()
	<-s.done
}

// Streams is the bucket's stream (see bus.Guard).
func (s *Slots) Streams() []string { return []string{bus.KVStream(Bucket(s.names))} }

// Recreate creates the bucket again after it was deleted (see bus.Guard):
// every slot is free then, and the runs holding one find out when their
// next refresh fails (they run on; the bound is kept again as they end).
func (s *Slots) Recreate(ctx context.Context, _ string) error {
	if _, err := s.ensure(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.view = map[string]seen{}
	s.mu.Unlock()
	return nil
}

// Max is the number of slots.
func (s *Slots) Max() int { return s.max }

// candidate is a slot to try and the revision to expect there.
type candidate struct {
	key string
	rev uint64
}

// candidates are the slots that look takeable for runID, from the view:
// the one runID already holds (a redelivery) first, then free ones, never
// written ones and ones whose holder stopped refreshing a lease ago (the
// server removed them: expect no message), in an order that starts at a
// random slot so gateways spread over them.
func (s *Slots) candidates(runID string) []candidate {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []candidate
	off := rand.IntN(s.max)
	for i := range s.max {
		key := slotKey((off + i) % s.max)
		v, ok := s.view[key]
		switch {
		case ok && v.runID == runID:
			out = append([]candidate{{key, v.rev}}, out...)
		case !ok:
			out = append(out, candidate{key, 0})
		case v.runID == "":
			out = append(out, candidate{key, v.rev})
		case now.Sub(v.at) > s.lease:
			out = append(out, candidate{key, 0})
		}
	}
	return out
}

// Full reports, from the view alone (no read), that runID would find
// every slot held by another run.
func (s *Slots) Full(runID string) bool { return len(s.candidates(runID)) == 0 }

func slotKey(i int) string { return "slot." + strconv.Itoa(i) }

// Slot is a held slot.
type Slot struct {
	s   *Slots
	key string
	val holder
	rev uint64
}

// Acquire takes a slot for runID: the one it already holds (its gateway
// died or gave it back unfinished), else a free one, one write each. A
// slot taken meanwhile by another gateway is skipped. ErrFull when none
// could be taken.
func (s *Slots) Acquire(ctx context.Context, runID string) (*Slot, error) {
	for _, c := range s.candidates(runID) {
		sl := &Slot{s: s, key: c.key, val: holder{RunID: runID, Gateway: s.owner}}
		err := sl.write(ctx, c.rev)
		if err == nil {
			return sl, nil
		}
		if !bus.IsWrongLastSeq(err) {
			return nil, fmt.Errorf("take a sub-agent slot: %w", err)
		}
	}
	return nil, ErrFull
}

// write stores the held slot with the lease as its TTL, expecting the
// key's last revision to be rev.
func (sl *Slot) write(ctx context.Context, rev uint64) error {
	data, _ := json.Marshal(sl.val)
	seq, err := record.PutLease(ctx, sl.s.js, sl.s.kv, sl.key, data, rev, sl.s.lease)
	if err != nil {
		return err
	}
	sl.rev = seq
	return nil
}

// Key is the slot's key (slot.<n>).
func (sl *Slot) Key() string { return sl.key }

// Refresh restarts the lease; false when the slot was lost (expired and
// taken by another run).
func (sl *Slot) Refresh(ctx context.Context) bool { return sl.write(ctx, sl.rev) == nil }

// Release frees the slot for the next run. A slot that was lost is left
// to its new holder.
func (sl *Slot) Release(ctx context.Context) error {
	_, err := sl.s.kv.Update(ctx, sl.key, free, sl.rev)
	if err != nil && bus.IsWrongLastSeq(err) {
		return nil
	}
	return err
}
