package handlers

import (
	"context"
	"encoding/json"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/cron"
	"github.com/sessionbus/sessionbus/flows/stores"
	"github.com/sessionbus/sessionbus/kv/cronjobs"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/crontick"
)

// startCron opens the cron job bucket and stream and, unless
// cron.enabled is false, takes ticks from the shared consumer: each tick
// goes to one worker, which starts its run once.
//
// Each step is retried while the cluster settles (as the other stores
// are): right after a cluster restarts, the consumer's own replicas may
// still be electing a leader when the stream's have one.
func (w *Worker) startCron(ctx context.Context, s *stores.Stores) error {
	d := w.Deps
	var jobs *cronjobs.Jobs
	var ticks *crontick.Ticks
	if err := stores.RetryTransient(ctx, d.Log, "cron jobs", func(ctx context.Context) (err error) {
		jobs, err = cronjobs.Open(ctx, s.JS, d.Names, cronjobs.WithReplicas(d.Config.Bus.Replicas))
		return err
	}); err != nil {
		return err
	}
	if err := stores.RetryTransient(ctx, d.Log, "cron ticks", func(ctx context.Context) (err error) {
		ticks, err = crontick.Open(ctx, s.JS, d.Names, crontick.WithReplicas(d.Config.Bus.Replicas))
		return err
	}); err != nil {
		return err
	}
	d.Cron = &cron.Service{
		Jobs: jobs, Ticks: ticks, Starter: d.starter(), Runs: d.Runs, Store: d.Store,
		JS: s.JS, Names: d.Names, Config: d.Config, Signals: s.Signals, Log: d.Log, Now: d.Now,
	}
	if !d.Config.Cron.Enabled {
		return nil
	}
	return stores.RetryTransient(ctx, d.Log, "cron tick consumer", func(ctx context.Context) (err error) {
		w.cronTicks, err = ticks.Consume(ctx, d.Cron.HandleTick, d.Log.Warn)
		return err
	})
}

// stopCron stops taking ticks; a tick in hand is redelivered to another
// worker after crontick.AckWait.
func (w *Worker) stopCron() {
	if w.cronTicks != nil {
		w.cronTicks.Stop()
	}
	if w.Deps.Cron != nil {
		w.Deps.Cron.Close()
	}
}

// CronOps are the cron job operations on <prefix>.ops.cron.<op>
// (docs/cron.md), OpenClaw's cron.add/update/remove/run/runs/list. Like
// the session operations they take an ops token (adapter '*'): a channel
// adapter's token may not schedule turns.
func (d *Deps) CronOps() map[string]bus.Handler {
	op := func(run func(ctx context.Context, p rules.Params, body []byte) (any, error)) bus.Handler {
		return bus.HandlerFunc(func(ctx context.Context, req *bus.Request) (any, error) {
			if req.Caller.Adapter != bus.AnyChannel {
				return nil, bus.Errorf(bus.CodeForbidden,
					"cron jobs take an ops token (`sessionbus token --adapter '*'`); this one is channel %q's adapter token", req.Caller.Adapter)
			}
			if d.Cron == nil {
				return nil, bus.Errorf(bus.CodeUnavailable, "this worker has no cron store")
			}
			p, err := rules.ParseParams(req.Body)
			if err != nil {
				return nil, bus.Thrown(err)
			}
			return run(ctx, p, req.Body)
		})
	}
	jobID := func(p rules.Params) (string, error) {
		id, err := p.RequiredString("jobId")
		return id, bus.Thrown(err)
	}
	byID := func(fn func(ctx context.Context, id string) (any, error)) bus.Handler {
		return op(func(ctx context.Context, p rules.Params, _ []byte) (any, error) {
			id, err := jobID(p)
			if err != nil {
				return nil, err
			}
			return fn(ctx, id)
		})
	}
	return map[string]bus.Handler{
		"add": op(func(ctx context.Context, _ rules.Params, body []byte) (any, error) {
			return d.Cron.Add(ctx, body)
		}),
		"list": op(func(ctx context.Context, _ rules.Params, _ []byte) (any, error) {
			jobs, err := d.Cron.List(ctx)
			return map[string]any{"jobs": jobs}, err
		}),
		"edit": op(func(ctx context.Context, p rules.Params, body []byte) (any, error) {
			id, err := jobID(p)
			if err != nil {
				return nil, err
			}
			var in struct {
				Patch json.RawMessage `json:"patch"`
			}
			if err := json.Unmarshal(body, &in); err != nil || len(in.Patch) == 0 {
				return nil, bus.Errorf(bus.CodeBadRequest, "cron edit needs a patch object: {\"jobId\": ..., \"patch\": {...}}")
			}
			return d.Cron.Edit(ctx, id, in.Patch)
		}),
		"enable": byID(func(ctx context.Context, id string) (any, error) { return d.Cron.SetEnabled(ctx, id, true) }),
		"disable": byID(func(ctx context.Context, id string) (any, error) {
			return d.Cron.SetEnabled(ctx, id, false)
		}),
		"rm": byID(func(ctx context.Context, id string) (any, error) {
			return map[string]any{"ok": true, "removed": id}, d.Cron.Remove(ctx, id)
		}),
		"run": byID(func(ctx context.Context, id string) (any, error) {
			runID, err := d.Cron.RunNow(ctx, id)
			return map[string]any{"ok": err == nil, "enqueued": err == nil, "runId": runID}, err
		}),
		"runs": op(func(ctx context.Context, p rules.Params, _ []byte) (any, error) {
			id, err := jobID(p)
			if err != nil {
				return nil, err
			}
			limit, _, err := p.NonNegativeInt("limit")
			if err != nil {
				return nil, bus.Thrown(err)
			}
			runs, err := d.Cron.RunsOf(ctx, id, limit)
			return map[string]any{"jobId": id, "runs": runs}, err
		}),
	}
}
