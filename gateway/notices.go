package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/events"
	"github.com/sessionbus/sessionbus/streams/runqueue"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// Parent notices (docs/signals.md), delivered by whichever gateway claims
// them. A main-session watcher is woken: the claim winner queues a run in
// the watcher's session whose message is the notice (run id = notice id,
// so it runs once however often the notice is swept). A sub-agent watcher
// is not woken (unless session.notices.wakeSubagents): every gateway keeps
// its pending notices in memory and the gateway that runs the watcher's
// next turn puts them at the start of that turn. Either way the notice is
// acknowledged once the turn holding it recorded its prompt, and a
// follow-up is published if more happened meanwhile.

// noticeLease is how long a claimed notice is its gateway's to deliver:
// long enough for the few writes between claim and queued run. A holder
// slower than that is harmless: the run id is the notice id, so a second
// claimant queues the same run, which runs once.
const noticeLease = 10 * time.Second

// noticeSweepEvery is how often a gateway re-materializes pending notices
// (and once at start): what a dead gateway left undelivered is delivered
// within a lease and a sweep.
const noticeSweepEvery = 10 * time.Second

// pendingNotices are sub-agent watchers' notices waiting for their next
// turn, per watcher and target.
type pendingNotices struct {
	mu sync.Mutex
	m  map[string]map[string]notices.Body
}

func (p *pendingNotices) add(b notices.Body) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]map[string]notices.Body{}
	}
	if p.m[b.Watcher] == nil {
		p.m[b.Watcher] = map[string]notices.Body{}
	}
	p.m[b.Watcher][b.Target] = b
}

func (p *pendingNotices) take(watcher string) []notices.Body {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []notices.Body
	for _, b := range p.m[watcher] {
		out = append(out, b)
	}
	delete(p.m, watcher)
	return out
}

// wakes reports whether a notice to watcher starts a run.
func (g *Gateway) wakes(watcher string) bool {
	return !rules.IsSubagentKey(watcher) || g.cfg.Session.Notices.WakeSubagents
}

// onNotice is every notice event this gateway receives.
func (g *Gateway) onNotice(ev *events.Event) {
	var b notices.Body
	if err := json.Unmarshal(ev.Body, &b); err != nil || b.Watcher == "" || b.Target == "" {
		g.log.Warn("gateway: skipping a malformed notice", "id", ev.ID, "err", err)
		return
	}
	if !g.wakes(b.Watcher) {
		g.pending.add(b)
		return
	}
	ctx, cancel := opCtx(g.ctx)
	defer cancel()
	if err := g.deliverNotice(ctx, b); err != nil && g.ctx.Err() == nil {
		g.log.Warn("gateway: deliver notice (the sweep retries)", "watcher", b.Watcher, "target", b.Target, "err", err)
	}
}

// deliverNotice wakes the watcher with a run carrying the notice, if this
// gateway wins its claim.
func (g *Gateway) deliverNotice(ctx context.Context, b notices.Body) error {
	n := watchers.Notice{Watcher: b.Watcher, Target: b.Target, LastSeenSequence: b.LastSeenSequence}
	id := notices.ID(n)
	rev, err := g.claims.Take(ctx, "notice."+id, g.id, noticeLease)
	if errors.Is(err, claims.ErrTaken) {
		return nil
	}
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	req := &runqueue.Request{
		RunID: id, SessionKey: b.Watcher, AgentID: rules.AgentIDFromKey(b.Watcher),
		Message: b.Text, Prompt: b.Text,
		Provenance: &runqueue.Provenance{Kind: "internal_system"},
		ChainID:    id, CreatedAt: now,
		Notice: &runqueue.NoticeRef{Watcher: b.Watcher, Target: b.Target, LastSeenSequence: b.LastSeenSequence},
	}
	err = g.submitOnce(ctx, req)
	g.opts.Observer.Delivered("notice", err)
	if err != nil {
		_ = g.claims.Release(ctx, "notice."+id, rev)
		return err
	}
	return g.claims.Finish(ctx, "notice."+id, g.id, rev)
}

// ackNotice acknowledges the notice b once the turn that held it recorded
// its prompt, and publishes the follow-up if material events arrived
// meanwhile. Only b itself is acknowledged: a repeated acknowledgement
// (a redelivered run, a sweep racing the run) finds a follow-up pending,
// not b, and leaves it alone.
func (g *Gateway) ackNotice(ctx context.Context, b notices.Body) error {
	follow, err := g.watchers.AckNotice(ctx, watchers.Notice{Watcher: b.Watcher, Target: b.Target, LastSeenSequence: b.LastSeenSequence})
	if err != nil || follow == nil {
		return err
	}
	return g.recorder.Publish(ctx, *follow)
}

// noticesForTurn takes the sub-agent watcher's pending notices for the turn
// about to run in its session, checked against their cursors (another
// gateway may have delivered them), and returns their texts.
func (g *Gateway) noticesForTurn(ctx context.Context, session string) []notices.Body {
	var out []notices.Body
	for _, b := range g.pending.take(session) {
		c, err := g.watchers.Get(ctx, b.Watcher, b.Target)
		if err != nil || !c.Pending() {
			continue
		}
		// the text as pending now: byte-stable while pending
		n := watchers.Notice{Watcher: c.Watcher, Target: c.Target, LastSeenSequence: c.LastSeenSequence}
		out = append(out, notices.BodyOf(n))
	}
	return out
}

// withNotices prefixes a prompt with the notices the turn delivers.
func withNotices(prompt string, ns []notices.Body) string {
	if len(ns) == 0 {
		return prompt
	}
	var sb strings.Builder
	for _, n := range ns {
		sb.WriteString("System: ")
		sb.WriteString(n.Text)
		sb.WriteString("\n")
	}
	sb.WriteString("\n")
	sb.WriteString(prompt)
	return sb.String()
}

// noticeSweepLoop re-materializes pending notices at start and every
// noticeSweepEvery: a woken watcher's notice whose run finished but whose
// acknowledgement was lost is acknowledged; one never queued (its gateway
// died holding the claim, now expired) is delivered; a sub-agent watcher's
// goes back to the pending set.
func (g *Gateway) noticeSweepLoop() {
	defer g.wg.Done()
	t := time.NewTicker(noticeSweepEvery)
	defer t.Stop()
	for {
		g.sweepNotices()
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *Gateway) sweepNotices() {
	ctx, cancel := opCtx(g.ctx)
	defer cancel()
	pending, err := g.watchers.PendingNotices(ctx)
	if err != nil {
		if g.ctx.Err() == nil {
			g.log.Warn("gateway: notice sweep", "err", err)
		}
		return
	}
	for _, n := range pending {
		b := notices.BodyOf(n)
		if !g.wakes(n.Watcher) {
			g.pending.add(b)
			continue
		}
		rec, _, err := g.runs.Get(ctx, notices.ID(n))
		switch {
		case err == nil && rec.Terminal() && rec.TranscriptAt != nil:
			err = g.ackNotice(ctx, b)
		case err == nil && rec.Status == runs.Pending:
			// queued, or its claimant died between the run record and the
			// queued message: the claim (done, or expired) decides
			err = g.deliverNotice(ctx, b)
		case err == nil:
			continue // running: its run acknowledges it
		case errors.Is(err, jetstream.ErrKeyNotFound):
			err = g.deliverNotice(ctx, b)
		}
		if err != nil && g.ctx.Err() == nil {
			g.log.Warn("gateway: notice sweep", "watcher", n.Watcher, "target", n.Target, "err", err)
		}
	}
}

// recordSignal appends a log-only event of a child's run (child_spawned,
// run_completed, run_failed). Best effort: a failure is logged, never
// fails the run.
func (g *Gateway) recordSignal(ctx context.Context, ev signals.Event) {
	if _, err := g.recorder.Record(ctx, ev); err != nil {
		g.log.Warn("gateway: signal log append failed (the run goes on)", "session", ev.SessionKey, "kind", ev.Kind, "err", err)
	}
}
