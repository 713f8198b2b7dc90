package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv"
)

// laneLock is the value of a session's key in the lanes bucket. A held lane
// names its run; a released one is written back with no run and expiresAt 0
// rather than deleted, so the next taker can compare-and-set against the
// revision the release returned (a Create over a delete marker costs three
// round trips, a CAS one).
type laneLock struct {
	RunID     string `json:"runId,omitempty"`
	Gateway   string `json:"gateway,omitempty"`
	ExpiresAt int64  `json:"expiresAt"` // unix ms; 0 when free
}

var freeLane = []byte(`{"expiresAt":0}`)

// lane is a held lock; refresh and release use its revision, so a lock taken
// over by another replica after expiry is never refreshed or released here.
type lane struct {
	g   *Gateway
	key string
	val laneLock
	rev uint64
}

var errLaneBusy = errors.New("session lane busy")

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

// acquireLane takes the session's lane for runID: a CAS from the revision
// this gateway released it at (laneRevs), else a read and a CAS over a free or expired
// lock or one this same run left behind (a redelivery after its gateway died
// or its ack wait ran out), else a Create for a lane never taken.
func (g *Gateway) acquireLane(ctx context.Context, sessionKey, runID string) (*lane, error) {
	l := &lane{g: g, key: kv.EncodeKey(sessionKey)}
	l.val = laneLock{RunID: runID, Gateway: g.id, ExpiresAt: time.Now().Add(g.ackWait).UnixMilli()}
	data, _ := json.Marshal(l.val)
	g.releasing.wait(ctx, l.key)
	if rev, ok := g.laneRevs.take(l.key); ok {
		nrev, err := g.lanes.Update(ctx, l.key, data, rev)
		if err == nil {
			l.rev = nrev
			return l, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, err
		}
	}
	e, err := g.lanes.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// never taken, or deleted: Create handles both
		rev, err := g.lanes.Create(ctx, l.key, data)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, errLaneBusy // taken meanwhile
		}
		if err != nil {
			return nil, err
		}
		l.rev = rev
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	var cur laneLock
	_ = json.Unmarshal(e.Value(), &cur)
	expired := cur.ExpiresAt < time.Now().UnixMilli()
	mine := cur.RunID == runID && cur.Gateway == g.id
	if !expired && !mine {
		return nil, errLaneBusy
	}
	rev, err := g.lanes.Update(ctx, l.key, data, e.Revision())
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, errLaneBusy
		}
		return nil, err
	}
	l.rev = rev
	return l, nil
}

// refresh extends the lock; false when it was lost.
func (l *lane) refresh(ctx context.Context) bool {
	l.val.ExpiresAt = time.Now().Add(l.g.ackWait).UnixMilli()
	data, _ := json.Marshal(l.val)
	rev, err := l.g.lanes.Update(ctx, l.key, data, l.rev)
	if err != nil {
		return false
	}
	l.rev = rev
	return true
}

func (l *lane) release(ctx context.Context) {
	rev, err := l.g.lanes.Update(ctx, l.key, freeLane, l.rev)
	if err != nil {
		l.g.log.Debug("release lane", "key", l.key, "err", err)
		return
	}
	l.g.laneRevs.put(l.key, rev)
}
