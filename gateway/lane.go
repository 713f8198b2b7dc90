package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/lanes"
)

// A session's lane is a KV key that lets one run at a time hold the
// session: a run takes it in its first wave (run.claim), keeps it fresh with
// heartbeats while the turn runs, and hands it over with its outcome. A run
// that finds it busy is retried after laneRetryDelay.

// releasing tracks this gateway's lane releases in flight: a run taking a
// lane its own gateway is releasing waits for the release rather than
// finding the lane busy and backing off (the outcome, which lets the caller
// send again, is written in the same wave as the release: see run).
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

// laneRetryDelay backs off with the number of deliveries: a queued request
// polls its busy lane quickly at first, then at most every 500 ms.
func laneRetryDelay(msg jetstream.Msg) time.Duration {
	n := uint64(1)
	if md, err := msg.Metadata(); err == nil {
		n = md.NumDelivered
	}
	d := 10 * time.Millisecond << min(n-1, 6)
	return min(d, 500*time.Millisecond)
}

// startHeartbeat keeps the message and the lane ours while the turn runs.
func (r *run) startHeartbeat(ctx context.Context) {
	hbCtx, stop := context.WithCancel(ctx)
	r.hbStop = stop
	r.hbWG.Go(func() {
		t := time.NewTicker(r.g.heartbeat())
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				_ = r.msg.InProgress()
				r.laneMu.Lock()
				rctx, c := opCtx(hbCtx)
				if !r.lane.Refresh(rctx) && hbCtx.Err() == nil {
					r.g.log.Warn("gateway: lane lock lost", "run", r.req.RunID, "session", r.req.SessionKey)
				}
				c()
				r.laneMu.Unlock()
			}
		}
	})
}

func (r *run) stopHeartbeat() {
	if r.hbStop != nil {
		r.hbStop()
		r.hbWG.Wait()
		r.hbStop = nil
	}
}

// releaseLane stops the heartbeat and frees the lane; safe to call twice.
func (r *run) releaseLane() { r.startHandOver()(false) }

// startHandOver does what must come before the outcome is written (stop
// the heartbeat, tell this gateway's next run of the session to wait for
// this one's last wave instead of finding the lane busy) and returns what
// ends the lane's hold, to run once the outcome is written: freed says the
// outcome itself freed the lane (runs.Record.FreesLane), and only the
// revision to take it again from is kept; otherwise it is released with a
// write.
func (r *run) startHandOver() func(freed bool) {
	if r.released {
		return func(bool) {}
	}
	r.released = true
	r.stopHeartbeat()
	if r.lane == nil {
		return func(bool) {}
	}
	done := r.g.releasing.start(r.lane.Key())
	return func(freed bool) {
		defer done()
		if freed {
			r.g.laneRevs.put(r.lane.Key(), r.lane.Rev())
			return
		}
		rctx, c := opCtx(context.Background())
		defer c()
		r.g.releaseLane(rctx, r.lane)
	}
}
