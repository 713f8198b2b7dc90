package gateway

import (
	"context"

	"github.com/sessionbus/sessionbus/flows/cron"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
)

// cronReap removes cron run sessions past session.maintenance's
// resetArchiveRetention (OpenClaw's cron reaper follows that knob), one
// gateway per interval under the reaper's lease.
func (g *Gateway) cronReap(ctx context.Context) {
	p := lifecycle.MaintenanceFrom(g.cfg.Session.Maintenance)
	if !p.Enforce {
		return // warn mode changes nothing
	}
	r := &cron.Reaper{Life: g.life, Retention: p.ArchiveRetention}
	removed, err := r.RunLeased(ctx, g.id, LifecycleSweepInterval)
	if err != nil && g.ctx.Err() == nil {
		g.log.Warn("gateway: cron run-session reaper", "removed", len(removed), "err", err)
	}
}
