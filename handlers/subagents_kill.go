package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/client/schema"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/revocations"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/rules"
)

// The kill action: end a child's run, or every child's, and the runs
// below them.

type killResult = schema.SubagentsKillResult

// kill ends target's run and the runs below it; target "all" (or "*")
// kills every child of the controller.
func (c *subagentsCall) kill(ctx context.Context, target string) (*killResult, error) {
	if target == "all" || target == "*" {
		if c.ctl.controlScope != controlScopeChildren {
			return &killResult{Status: rules.StatusForbidden, Action: "kill", Target: "all", Error: errSubagentLeaf}, nil
		}
		seen := map[string]bool{}
		labels := []string{}
		killed := 0
		for _, ch := range c.children {
			if seen[ch.rec.ChildSessionKey] {
				continue
			}
			seen[ch.rec.ChildSessionKey] = true
			c.d.unbindKilled(ctx, ch.rec)
			if !ch.ended() {
				ok, err := c.d.killRun(ctx, ch.rec)
				if err != nil {
					return nil, err
				}
				if ok {
					killed++
					labels = append(labels, ch.label())
				}
			}
			n, ls, err := c.cascade(ctx, ch.rec.ChildSessionKey, seen)
			if err != nil {
				return nil, err
			}
			killed += n
			labels = append(labels, ls...)
		}
		text := subagentsNoneText
		if killed > 0 {
			text = fmt.Sprintf("killed %d %s.", killed, plural(killed, "subagent", "subagents"))
		}
		return &killResult{Status: "ok", Action: "kill", Target: "all", Killed: &killed, Labels: labels, Text: text}, nil
	}
	ch, f := c.resolveOrOwnership(target)
	if f != nil {
		return &killResult{Status: f.Status, Action: "kill", Target: target, Error: f.Error}, nil
	}
	if f := c.checkControl(ch); f != nil {
		return &killResult{Status: f.Status, Action: "kill", Target: target, RunID: ch.rec.RunID, SessionKey: ch.rec.ChildSessionKey, Error: f.Error}, nil
	}
	label := ch.label()
	c.d.unbindKilled(ctx, ch.rec)
	stopped := false
	if !ch.ended() {
		var err error
		if stopped, err = c.d.killRun(ctx, ch.rec); err != nil {
			return nil, err
		}
	}
	n, labels, err := c.cascade(ctx, ch.rec.ChildSessionKey, map[string]bool{ch.rec.ChildSessionKey: true})
	if err != nil {
		return nil, err
	}
	res := &killResult{Action: "kill", Target: target, RunID: ch.rec.RunID, SessionKey: ch.rec.ChildSessionKey, Label: label}
	if !stopped && n == 0 {
		res.Status, res.Text = "done", label+" is already finished."
		return res, nil
	}
	res.Status, res.CascadeKilled = "ok", &n
	if n > 0 {
		res.CascadeLabels = labels
	}
	switch {
	case stopped && n > 0:
		res.Text = fmt.Sprintf("killed %s (+ %d %s).", label, n, plural(n, "descendant", "descendants"))
	case stopped:
		res.Text = "killed " + label + "."
	default:
		res.Text = fmt.Sprintf("killed %d %s of %s.", n, plural(n, "descendant", "descendants"), label)
	}
	return res, nil
}

// cascade kills every active run below key, recursively (even below a
// child that already ended), skipping children already seen.
func (c *subagentsCall) cascade(ctx context.Context, key string, seen map[string]bool) (int, []string, error) {
	killed := 0
	var labels []string
	for _, rec := range c.d.Children.Controlled(key) {
		if seen[rec.ChildSessionKey] {
			continue
		}
		seen[rec.ChildSessionKey] = true
		c.d.unbindKilled(ctx, rec)
		if rec.Active() {
			ok, err := c.d.killRun(ctx, rec)
			if err != nil {
				return 0, nil, err
			}
			if ok {
				killed++
				labels = append(labels, (&child{rec: rec}).label())
			}
		}
		n, ls, err := c.cascade(ctx, rec.ChildSessionKey, seen)
		if err != nil {
			return 0, nil, err
		}
		killed += n
		labels = append(labels, ls...)
	}
	return killed, labels, nil
}

// killRun ends a child's current run as killed: a CAS on its run record,
// which only a run not yet terminal takes. The gateway running the turn
// sees the record turn terminal and stops the turn; the registry record is
// then finalized and the kill announced (docs/subagents.md, "Ended"). A run
// that was never queued gets a killed record, so it never runs and the
// sweep that would queue it again finds it ended. It reports whether this
// call ended the run.
func (d *Deps) killRun(ctx context.Context, rec *subagents.Record) (bool, error) {
	now := d.Now().UnixMilli()
	killed := false
	_, err := d.Runs.Update(ctx, rec.RunID, func(r *runs.Record) error {
		if r.Terminal() {
			killed = false
			return record.ErrUnchanged
		}
		r.Status, r.Error, r.EndedAt = runs.Killed, subagentKilledRunReason, now
		killed = true
		return nil
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		err = d.Runs.Create(ctx, &runs.Record{
			RunID: rec.RunID, SessionKey: rec.ChildSessionKey, AgentID: rec.ChildAgentID,
			Status: runs.Killed, Error: subagentKilledRunReason, CreatedAt: now, EndedAt: now,
		})
		if errors.Is(err, runs.ErrExists) { // queued meanwhile: kill that record
			return d.killRun(ctx, rec)
		}
		killed = err == nil
	}
	if err != nil {
		return false, fmt.Errorf("kill run %s of %s: %w", rec.RunID, rec.ChildSessionKey, err)
	}
	if killed && d.Revocations != nil {
		// its tokens end now, not when its gateway notices the kill
		if err := d.Revocations.Revoke(ctx, rec.RunID, revocations.ReasonKilled); err != nil {
			d.Log.Warn("killed run's token not revoked: it stays valid until its run stops", "run", rec.RunID, "err", err)
		}
	}
	return killed, nil
}

// unbindKilled ends the thread binding of a killed child (a thread-bound
// session-mode child whose turn already ended too: killing it is how its
// requester ends the binding), so the humans' next message in the thread
// goes where the routing rules send it. Best effort: the ingress also
// treats a killed child's binding as ended.
func (d *Deps) unbindKilled(ctx context.Context, rec *subagents.Record) {
	if err := spawns.Unbind(ctx, d.ThreadBindings, rec); err != nil {
		d.Log.Warn("subagents kill: remove the thread binding (the ingress ignores it)", "child", rec.ChildSessionKey, "err", err)
	}
}
