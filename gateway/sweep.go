package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/streams/runqueue"
)

// Defaults of the sub-agent keys of the bus config section.
const (
	DefaultSweepInterval   = 2 * time.Second
	DefaultAnnounceRetries = 5
)

// spawnGrace is how old a registry record whose run was never queued must
// be before a sweep queues it: younger, its spawn is likely still at work.
const spawnGrace = 5 * time.Second

// sweepLoop sweeps the child registry at start and every sweepEvery. The
// timers of sub-agents (run deadlines) and the delivery of their announces
// live in JetStream, in the registry records; any gateway's sweep acts on
// them, so none is lost when the gateway that set them dies, or when every
// gateway was down at the moment they fell due.
func (g *Gateway) sweepLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.sweepEvery)
	defer t.Stop()
	for {
		g.sweep()
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep picks the records needing work from the in-memory index (no read
// of the bucket) and works on each.
func (g *Gateway) sweep() {
	now := time.Now()
	var todo []*subagents.Record
	g.children.Each(func(c *subagents.Record) bool {
		if g.sweepWants(c, now) {
			todo = append(todo, c)
		}
		return true
	})
	for _, c := range todo {
		if g.ctx.Err() != nil {
			return
		}
		ctx, cancel := opCtx(g.ctx)
		err := g.sweepOne(ctx, c, now)
		cancel()
		if err != nil && g.ctx.Err() == nil {
			g.log.Warn("gateway: sub-agent sweep", "child", c.ChildSessionKey, "run", c.RunID, "err", err)
		}
	}
}

// sweepWants says whether c may need a sweep's work.
func (g *Gateway) sweepWants(c *subagents.Record, now time.Time) bool {
	ms := now.UnixMilli()
	older := func(at int64, d time.Duration) bool { return at > 0 && ms-at >= d.Milliseconds() }
	if c.Active() {
		switch {
		case c.StartedAt == 0 && !c.Queued:
			return older(c.CreatedAt, spawnGrace) // a half-done spawn?
		case c.DeadlineAt > 0 && ms >= c.DeadlineAt:
			return true
		case c.StartedAt > 0:
			return older(c.StartedAt, g.sweepEvery) // ended unseen?
		}
		return false
	}
	if archiveDue(c, g.archiveAfter(c), now) {
		return true
	}
	if c.Announce == nil {
		return false
	}
	switch c.Announce.State {
	case subagents.AnnouncePending, subagents.AnnounceQueued:
		// give the normal path (publish, claim, queue, deliver) its time
		return older(c.Announce.At, g.sweepEvery)
	case subagents.AnnounceDelivered, subagents.AnnounceSkipped:
		return c.Cleanup == "delete" && !c.Deleted
	}
	return false
}

func (g *Gateway) sweepOne(ctx context.Context, c *subagents.Record, now time.Time) error {
	if archiveDue(c, g.archiveAfter(c), now) {
		return g.removeChild(ctx, c, archives.ReasonArchived)
	}
	if !c.Active() {
		switch c.Announce.State {
		case subagents.AnnouncePending:
			// the claim decides: a live one (its holder at work) refuses
			return g.deliverAnnounce(ctx, c.ChildSessionKey, c.RunID)
		case subagents.AnnounceQueued:
			// queued: the carrying run is in SB_RUNS and marks delivered when
			// it runs; if it ran but the mark was lost, mark it now
			rec, _, err := g.runs.Get(ctx, c.Announce.DeliveryRun)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return nil // taken but not yet recorded: the gateway taking it writes it
			}
			if err != nil {
				return err
			}
			if rec.Terminal() && rec.TranscriptAt == nil {
				return g.carrierEnded(ctx, c, rec) // it will never carry it
			}
			if !rec.Terminal() || rec.TranscriptAt == nil {
				return nil
			}
			return g.announceCarried(ctx, &runqueue.Request{
				RunID: rec.RunID, SessionKey: rec.SessionKey,
				Announce: &runqueue.AnnounceRef{ChildSessionKey: c.ChildSessionKey, ChildRunID: c.RunID},
			})
		}
		return g.cleanupChild(ctx, c)
	}
	if c.StartedAt == 0 && !c.Queued {
		// a spawn that stopped after its commit point (creation design):
		// idempotent, however many gateways do it at once
		return spawns.Complete(ctx, g.reg, g.store, g.runs, g.queue, c)
	}
	if c.DeadlineAt > 0 && now.UnixMilli() >= c.DeadlineAt {
		rec, err := g.expireRun(ctx, c.RunID, c.RunTimeoutSeconds)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("time out run: %w", err)
		}
		return g.childEnded(ctx, c.ChildSessionKey, rec)
	}
	rec, _, err := g.runs.Get(ctx, c.RunID)
	if err != nil || !rec.Terminal() {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		return err
	}
	return g.childEnded(ctx, c.ChildSessionKey, rec)
}
