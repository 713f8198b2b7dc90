package gateway

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/lanes"
)

// releasing tracks this gateway's lane releases in flight: a run taking a
// lane its own gateway is releasing waits for the release rather than
// finding the lane busy and backing off (the outcome, which lets the caller
// send again, is written in the same wave as the release).
type releasing struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (r *releasing) start(key string) func() {
	ch := make(chan struct{})
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]chan struct{}{}
	}
	r.m[key] = ch
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if r.m[key] == ch {
			delete(r.m, key)
		}
		r.mu.Unlock()
		close(ch)
	}
}

func (r *releasing) wait(ctx context.Context, key string) {
	r.mu.Lock()
	ch := r.m[key]
	r.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// acquireLane takes the session's lane for runID, from the revision this
// gateway released it at, or held it at for a run whose outcome freed it,
// when it was the last to hold it (laneRevs).
func (g *Gateway) acquireLane(ctx context.Context, sessionKey, runID string) (*lanes.Lane, error) {
	key := bus.EncodeKey(sessionKey)
	g.releasing.wait(ctx, key)
	freedAt, _ := g.laneRevs.take(key)
	return g.lanes.Acquire(ctx, sessionKey, runID, freedAt)
}

// releaseLane frees l and remembers the revision for the session's next
// run here.
func (g *Gateway) releaseLane(ctx context.Context, l *lanes.Lane) {
	rev, err := l.Release(ctx)
	if err != nil {
		g.log.Debug("release lane", "key", l.Key(), "err", err)
		return
	}
	g.laneRevs.put(l.Key(), rev)
}

// runFreedLane is lanes.Lanes.Finished: a lane still naming runID is free
// when the run's own gateway recorded its outcome (runs.Record.FreesLane).
// A record that is gone (expired long after the lane's own lease) frees
// nothing: the lane's TTL does.
func (g *Gateway) runFreedLane(ctx context.Context, runID string) (bool, error) {
	rec, _, err := g.runs.Get(ctx, runID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return rec.Terminal() && rec.FreesLane, nil
}
