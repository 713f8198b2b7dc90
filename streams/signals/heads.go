package signals

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// Heads is every session's stateVersion held in memory and kept current by
// a watch of the heads bucket: what sessions_list puts on its rows without
// a read per row. A version can lag an append by the watch's delay.
type Heads struct {
	mu sync.RWMutex
	v  map[string]uint64 // session key -> last sequence

	cancel context.CancelFunc
	done   chan struct{}
}

// FollowHeads loads every head and follows the bucket until Stop.
func (l *Log) FollowHeads(ctx context.Context) (*Heads, error) {
	h := &Heads{v: map[string]uint64{}, done: make(chan struct{})}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := l.heads.KV().WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	h.cancel = cancel
	ready := make(chan struct{})
	go h.follow(wctx, w, ready)
	select {
	case <-ready:
		return h, nil
	case <-ctx.Done():
		h.Stop()
		return nil, ctx.Err()
	}
}

func (h *Heads) follow(ctx context.Context, w jetstream.KeyWatcher, ready chan struct{}) {
	defer close(h.done)
	record.Follow(ctx, w, ready, func(e jetstream.KeyValueEntry) {
		// by session key as the tools know it: a lookup per listed row
		// then costs no encoding
		key, err := bus.DecodeKey(e.Key())
		if err != nil {
			return
		}
		var hd head
		h.mu.Lock()
		defer h.mu.Unlock()
		if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &hd) == nil {
			h.v[key] = hd.LastSequence
		} else {
			delete(h.v, key)
		}
	})
}

// StateVersion is the session's head as last seen (0: none).
func (h *Heads) StateVersion(sessionKey string) uint64 {
	if h == nil {
		return 0
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.v[sessionKey]
}

// Stop ends the watch.
func (h *Heads) Stop() {
	h.cancel()
	<-h.done
}
