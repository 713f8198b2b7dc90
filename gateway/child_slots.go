package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/kv/childslots"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// A sub-agent's run (a spawn's run, a steer's restart) holds one of the
// fleet's agents.defaults.subagents.maxConcurrent slots (kv/childslots)
// from before it starts until its outcome is recorded. One that finds
// every slot taken waits queued, as OpenClaw's sub-agent lane queues it:
// its message goes back to the queue and is tried again, paced like a run
// waiting for its busy session, without counting as a failure.

// errChildQueued is errBusy to the delivery: try again later.
var errChildQueued = fmt.Errorf("sub-agent runs at agents.defaults.subagents.maxConcurrent: %w", errBusy)

// openSlots opens the fleet's sub-agent slots, leased as long as a run's
// message (both are kept by the run's heartbeat).
func (g *Gateway) openSlots(ctx context.Context) error {
	n := g.cfg.Agents.Defaults.Subagents.MaxConcurrent
	if n <= 0 { // a config built without the loader: the default, as Load gives it
		n = config.DefaultSubagentConcurrency
	}
	var err error
	g.slots, err = childslots.Open(ctx, g.js, g.names, g.id, n, g.ackWait,
		childslots.WithReplicas(g.cfg.Bus.Replicas))
	return err
}

// childQueued reports, from what this gateway knows without a read, that
// req is a sub-agent's current run and would find every slot taken: it
// then waits without reading its session first. A
// child that ended meanwhile (killed while it waited) goes through, to be
// acked as the ended run it is.
func (g *Gateway) childQueued(req *runqueue.Request, key rules.Key) bool {
	if g.slots == nil || !key.IsSubagent() {
		return false
	}
	c := g.children.Get(req.SessionKey)
	return c != nil && c.RunID == req.RunID && c.Active() && g.slots.Full(req.RunID)
}

// childSlot is a slot a run holds, refreshed while the run goes on.
type childSlot struct {
	g    *Gateway
	sl   *childslots.Slot
	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
}

// takeChildSlot takes a slot when the run is a sub-agent's current run
// (child, from childRecord; nil, nil for any other run); errChildQueued
// when every slot is taken.
func (r *run) takeChildSlot(ctx context.Context, child *subagents.Record) (*childSlot, error) {
	g := r.g
	if g.slots == nil || child == nil {
		return nil, nil
	}
	octx, cancel := opCtx(ctx)
	defer cancel()
	sl, err := g.slots.Acquire(octx, r.req.RunID)
	if errors.Is(err, childslots.ErrFull) {
		return nil, errChildQueued
	}
	if err != nil {
		return nil, err
	}
	hctx, stop := context.WithCancel(ctx)
	cs := &childSlot{g: g, sl: sl, stop: stop}
	cs.wg.Go(func() {
		t := time.NewTicker(g.heartbeat())
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
				rctx, c := opCtx(hctx)
				if !sl.Refresh(rctx) && hctx.Err() == nil {
					g.log.Warn("gateway: sub-agent slot lost (the bound may be passed until this run ends)", "run", r.req.RunID, "slot", sl.Key())
				}
				c()
			}
		}
	})
	return cs, nil
}

// free gives the slot back, in the background: the run's outcome is
// recorded, and its announce to the parent need not wait for this write.
// Safe to call twice and on nil.
func (cs *childSlot) free() {
	if cs == nil {
		return
	}
	cs.once.Do(func() {
		cs.stop()
		cs.g.wg.Go(func() {
			cs.wg.Wait()
			ctx, cancel := opCtx(context.Background())
			defer cancel()
			if err := cs.sl.Release(ctx); err != nil {
				cs.g.log.Debug("gateway: release sub-agent slot (it expires by itself)", "slot", cs.sl.Key(), "err", err)
			}
		})
	})
}
