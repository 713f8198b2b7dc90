package subagents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// Index is the registry held in memory and kept current by a watch: what
// `subagents list`, the fan-out limit and the gateways' sweeps read, none
// of which may cost a bucket scan per call. Its records are shared: never
// modify one. They carry no run request (Request is nil; Complete reads
// the stored record for it).
type Index struct {
	reg *Registry
	log *slog.Logger

	mu      sync.RWMutex
	changed *sync.Cond
	byKey   map[string]*Record
	// byController maps a controller (or requester) session key to the
	// child keys it controls.
	byController map[string]map[string]struct{}
	// active counts the records whose run has not ended, by requester:
	// the fan-out check of every spawn reads it.
	active  map[string]int
	applied uint64 // last revision applied
	err     error

	cancel context.CancelFunc
	done   chan struct{}
}

// StartIndex loads every record and follows the bucket until Stop.
func StartIndex(ctx context.Context, reg *Registry, log *slog.Logger) (*Index, error) {
	if log == nil {
		log = slog.Default()
	}
	ix := &Index{reg: reg, log: log, byKey: map[string]*Record{}, byController: map[string]map[string]struct{}{}, active: map[string]int{}}
	ix.changed = sync.NewCond(&ix.mu)
	wctx, cancel := context.WithCancel(context.Background())
	w, err := reg.KV().WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	ix.cancel, ix.done = cancel, make(chan struct{})
	ready := make(chan struct{})
	go ix.follow(wctx, w, ready)
	select {
	case <-ready:
		return ix, nil
	case <-ctx.Done():
		ix.Stop()
		return nil, ctx.Err()
	}
}

func (ix *Index) follow(ctx context.Context, w jetstream.KeyWatcher, ready chan struct{}) {
	defer close(ix.done)
	record.Follow(ctx, w, ready, ix.apply)
	ix.mu.Lock()
	if ix.err == nil {
		ix.err = errors.New("sub-agent index stopped")
	}
	ix.changed.Broadcast()
	ix.mu.Unlock()
}

func (ix *Index) apply(ke jetstream.KeyValueEntry) {
	key, err := bus.DecodeKey(ke.Key())
	if err != nil {
		ix.log.Warn("sub-agent index: undecodable key", "key", ke.Key(), "err", err)
		return
	}
	var rec *Record
	if ke.Operation() == jetstream.KeyValuePut {
		if rec = ix.reg.echo.Take(ke.Value()); rec != nil {
			// this process's own write (Registry.CreateAsync), already decoded
		} else if rec, err = decodeIndexed(ke.Value()); err != nil {
			ix.log.Warn("sub-agent index: skipping a corrupt record", "key", key, "err", err)
			rec = nil
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.put(key, rec)
	ix.applied = ke.Revision()
	ix.changed.Broadcast()
}

// put makes rec (nil: none) the record of key; ix.mu is held.
func (ix *Index) put(key string, rec *Record) {
	if old := ix.byKey[key]; old != nil {
		for _, c := range controllers(old) {
			if set := ix.byController[c]; set != nil {
				delete(set, key)
				if len(set) == 0 {
					delete(ix.byController, c)
				}
			}
		}
		delete(ix.byKey, key)
		if old.Active() {
			if ix.active[old.RequesterSessionKey]--; ix.active[old.RequesterSessionKey] <= 0 {
				delete(ix.active, old.RequesterSessionKey)
			}
		}
	}
	if rec != nil {
		ix.byKey[key] = rec
		if rec.Active() {
			ix.active[rec.RequesterSessionKey]++
		}
		for _, c := range controllers(rec) {
			set := ix.byController[c]
			if set == nil {
				set = map[string]struct{}{}
				ix.byController[c] = set
			}
			set[key] = struct{}{}
		}
	}
}

// Note applies rec, just written at revision rev by this process, ahead of
// the watch: a spawn's next fan-out check on this worker counts the child
// without waiting for the watch to deliver its own write. The watch then
// applies the same revision (and later ones) as usual; a revision it has
// already applied is not noted again, so no newer state is overwritten.
func (ix *Index) Note(rec *Record, rev uint64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.applied >= rev {
		return
	}
	c := *rec
	c.Request = nil // as decodeIndexed leaves it
	ix.put(c.ChildSessionKey, &c)
}

// decodeIndexed decodes a stored record without its run request (about
// two thirds of its bytes): every replica's index decodes every write of
// the registry, and only spawns.Complete, on the rare half-done spawn,
// needs the request; it reads the record.
func decodeIndexed(data []byte) (*Record, error) {
	var v struct {
		*Record
		Request skipped `json:"request"` // shallower than Record.Request: wins
	}
	v.Record = &Record{}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("corrupt sub-agent record: %w", err)
	}
	return v.Record, nil
}

// skipped is a JSON value checked but not kept.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// controllers are the keys a record is listed under: its controller and,
// when different, its requester (OpenClaw falls back to it).
func controllers(r *Record) []string {
	if r.ControllerSessionKey == "" || r.ControllerSessionKey == r.RequesterSessionKey {
		return []string{r.RequesterSessionKey}
	}
	return []string{r.ControllerSessionKey, r.RequesterSessionKey}
}

// Sync waits until every write made before the call is applied.
func (ix *Index) Sync(ctx context.Context) error {
	st, err := ix.reg.js.Stream(ctx, bus.KVStream(ix.reg.KV().Bucket()))
	if err != nil {
		return err
	}
	return ix.WaitApplied(ctx, st.CachedInfo().State.LastSeq)
}

// WaitApplied waits until the write at revision rev (or a later one) is
// applied.
func (ix *Index) WaitApplied(ctx context.Context, rev uint64) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return record.WaitFor(ctx, ix.changed, func() bool { return ix.applied >= rev }, func() error { return ix.err })
}

// Get returns a child's record, nil when unknown.
func (ix *Index) Get(childKey string) *Record {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.byKey[childKey]
}

// Controlled returns the records controlled by key (controllerSessionKey,
// falling back to requesterSessionKey, as OpenClaw lists them),
// newest first.
func (ix *Index) Controlled(key string) []*Record {
	ix.mu.RLock()
	out := make([]*Record, 0, len(ix.byController[key]))
	for k := range ix.byController[key] {
		r := ix.byKey[k]
		c := r.ControllerSessionKey
		if c == "" {
			c = r.RequesterSessionKey
		}
		if c == key {
			out = append(out, r)
		}
	}
	ix.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt > out[j].CreatedAt
		}
		return out[i].ChildSessionKey < out[j].ChildSessionKey
	})
	return out
}

// ActiveChildren counts the requester's children whose run has not ended.
func (ix *Index) ActiveChildren(requester string) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.active[requester]
}

// Each calls fn for every record until fn returns false (order undefined).
func (ix *Index) Each(fn func(*Record) bool) {
	ix.mu.RLock()
	recs := make([]*Record, 0, len(ix.byKey))
	for _, r := range ix.byKey {
		recs = append(recs, r)
	}
	ix.mu.RUnlock()
	for _, r := range recs {
		if !fn(r) {
			return
		}
	}
}

// Stop ends the watch.
func (ix *Index) Stop() {
	if ix.cancel != nil {
		ix.cancel()
		<-ix.done
	}
}
