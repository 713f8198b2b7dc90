package cron

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sessionbus/sessionbus/kv/cronjobs"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// followMax bounds how long a worker follows one run's outcome.
const followMax = 6 * time.Hour

// background is the work a Service does after a tick's run started: it
// follows the run to its end. Close stops it.
type background struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (b *background) start(fn func(ctx context.Context)) {
	b.once.Do(func() { b.ctx, b.cancel = context.WithCancel(context.Background()) })
	if b.ctx.Err() != nil {
		return
	}
	b.wg.Go(func() { fn(b.ctx) })
}

// Close stops following runs (a worker's shutdown): a run still going is
// left to its gateway; its job keeps "queued" as its last status.
func (s *Service) Close() {
	s.bg.once.Do(func() { s.bg.ctx, s.bg.cancel = context.WithCancel(context.Background()) })
	s.bg.cancel()
	s.bg.wg.Wait()
}

// follow waits for a started run's end, then records it: the job's last
// status, a run_completed or run_failed event on the signal log of the
// session it reports to, and for a one-shot that asked for it, the job's
// removal after a successful run (OpenClaw: delete after success; a
// failed one stays, disabled).
func (s *Service) follow(j *cronjobs.Job, id, sessionKey string) {
	s.bg.start(func(ctx context.Context) {
		wctx, cancel := context.WithTimeout(ctx, followMax)
		defer cancel()
		rec, err := s.Runs.Wait(wctx, id)
		if err != nil || rec == nil || !rec.Terminal() {
			return
		}
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer dcancel()
		s.recordSignal(dctx, j, rec, sessionKey)
		if j.Schedule.Kind == "at" && j.DeleteAfterRun && rec.Status == runs.OK {
			if err := s.remove(dctx, j.ID); err != nil && !errors.Is(err, cronjobs.ErrNotFound) {
				s.log().Warn("cron: delete after run", "job", j.ID, "err", err)
			}
			return
		}
		_, _ = s.Jobs.Update(dctx, j.ID, func(cur *cronjobs.Job) error {
			if cur.State.LastRunID == id {
				cur.State.LastStatus, cur.State.LastError = rec.Status, rec.Error
			}
			if j.Schedule.Kind == "at" && rec.Status != runs.OK {
				cur.Enabled = false
			}
			return nil
		})
	})
}

// recordSignal logs the run's outcome on the signal log (metadata only,
// deduplicated by run id, so two followers write one event).
func (s *Service) recordSignal(ctx context.Context, j *cronjobs.Job, rec *runs.Record, sessionKey string) {
	if s.Signals == nil {
		return
	}
	ev := signals.Event{
		DedupeKey: "cron-run-terminal:" + rec.RunID, SessionKey: sessionKey, AgentID: j.AgentID,
		Kind: signals.KindRunCompleted, ActorType: signals.ActorSystem, ActorID: "cron:" + j.ID,
		RunID: rec.RunID, OccurredAt: max(rec.EndedAt, time.Now().UnixMilli()),
		Summary: "cron run completed: " + j.Name, Payload: map[string]any{"jobId": j.ID, "source": "cron"},
	}
	if rec.Status != runs.OK {
		outcome := signals.OutcomeError
		switch rec.Status {
		case runs.Timeout:
			outcome = signals.OutcomeTimeout
		case runs.Killed, runs.Aborted:
			outcome = signals.OutcomeCancelled
		}
		ev.Kind, ev.Summary = signals.KindRunFailed, "cron run failed: "+j.Name
		ev.Payload["outcome"] = outcome
	}
	if _, _, err := s.Signals.Append(ctx, ev); err != nil {
		s.log().Warn("cron: signal log", "job", j.ID, "run", rec.RunID, "err", err)
	}
}
