package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/subagents"
)

// LifecycleSweepInterval paces the lifecycle sweep: finishing half-done
// deletes and resets, and the disk budget. OpenClaw's archive sweeper
// runs every 60 s.
const LifecycleSweepInterval = time.Minute

// lifecycleLoop runs the lifecycle sweep at start and every
// LifecycleSweepInterval. It runs beside the sub-agent sweep, not in it:
// an eviction pass may take long, and must not delay run timeouts and
// announces. Every gateway runs it; its steps are idempotent.
func (g *Gateway) lifecycleLoop() {
	defer g.wg.Done()
	t := time.NewTicker(LifecycleSweepInterval)
	defer t.Stop()
	for {
		g.lifecycleSweep()
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *Gateway) lifecycleSweep() {
	ctx, cancel := context.WithTimeout(g.ctx, LifecycleSweepInterval)
	defer cancel()
	if n, err := g.life.Finish(ctx); err != nil && g.ctx.Err() == nil {
		g.log.Warn("gateway: lifecycle sweep: finishing half-done operations", "finished", n, "err", err)
	}
	// session.maintenance's entry and archive pass: one gateway per
	// interval, under the lease, oldest first
	p := lifecycle.MaintenanceFrom(g.cfg.Session.Maintenance)
	if _, _, err := g.life.MaintainLeased(ctx, g.id, LifecycleSweepInterval, p); err != nil && g.ctx.Err() == nil {
		g.log.Warn("gateway: session maintenance", "err", err)
	}
	g.cronReap(ctx)
	if limit, ok := g.cfg.DiskBudget(); ok {
		target := g.cfg.Session.Maintenance.HighWater(limit)
		if _, err := g.life.Enforce(ctx, limit, target); err != nil && g.ctx.Err() == nil {
			g.log.Warn("gateway: disk budget", "err", err)
		}
	}
}

// archiveDue says whether a child's session is due for archiveAfterMinutes,
// as OpenClaw's code decides it (its docs say otherwise): only a
// run-mode spawn with cleanup "delete" gets an archive time, spawn time +
// archiveAfterMinutes; keep and session-mode spawns never do (cleanup is
// forced to keep in session mode, so cleanup "delete" means run mode).
// Unlike OpenClaw, a run still active, or whose announce is still on its
// way, is left alone: the announce reads the child's transcript.
func archiveDue(c *subagents.Record, archiveAfter time.Duration, now time.Time) bool {
	if archiveAfter <= 0 || c.Cleanup != "delete" || c.Deleted || c.Active() {
		return false
	}
	if c.Announce != nil && (c.Announce.State == subagents.AnnouncePending || c.Announce.State == subagents.AnnounceQueued) {
		return false
	}
	return now.UnixMilli() >= c.CreatedAt+archiveAfter.Milliseconds()
}

// archiveAfter is agents.defaults.subagents.archiveAfterMinutes (or the
// child agent's own); 0 or negative disables.
func (g *Gateway) archiveAfter(c *subagents.Record) time.Duration {
	return time.Duration(g.cfg.SubagentsFor(c.ChildAgentID).ArchiveAfterMinutes) * time.Minute
}

// removeChild archives and deletes a child's session (reason deleted after
// its announce, archived by archiveAfterMinutes), then marks the registry
// record Deleted, so `subagents list` still shows the outcome. A session
// already gone (an earlier attempt got that far) only needs the mark.
func (g *Gateway) removeChild(ctx context.Context, c *subagents.Record, reason string) error {
	if _, err := g.life.Delete(ctx, c.ChildSessionKey, reason, nil); err != nil {
		if e, ok := bus.AsError(err); !ok || e.Code != bus.CodeNotFound {
			return fmt.Errorf("%s sub-agent session %s: %w", reason, c.ChildSessionKey, err)
		}
	}
	_, err := g.reg.Update(ctx, c.ChildSessionKey, func(r *subagents.Record) error {
		if r.Deleted || r.RunID != c.RunID {
			return record.ErrUnchanged
		}
		r.Deleted = true
		return nil
	})
	return err
}
