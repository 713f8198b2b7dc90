package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/cronjobs"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/cronspec"
	"github.com/sessionbus/sessionbus/streams/deliveries"
)

func bad(format string, args ...any) error { return bus.Errorf(bus.CodeBadRequest, format, args...) }

// Add creates a job from OpenClaw's cron.add params (JSON): checked whole
// before anything is written, then stored and scheduled; a schedule the
// server refuses takes the stored job back out.
func (s *Service) Add(ctx context.Context, params []byte) (*cronjobs.Job, error) {
	var in struct {
		cronjobs.Job
		Enabled        *bool `json:"enabled"`
		DeleteAfterRun *bool `json:"deleteAfterRun"`
	}
	if err := json.Unmarshal(params, &in); err != nil {
		return nil, bad("cron add: the job is not valid JSON: %v", err)
	}
	j := in.Job
	now := s.now().UnixMilli()
	j.ID, j.CreatedAtMs, j.UpdatedAtMs, j.State = uuid.NewString(), now, now, cronjobs.State{}
	j.Enabled = in.Enabled == nil || *in.Enabled
	j.DeleteAfterRun = in.DeleteAfterRun != nil && *in.DeleteAfterRun
	if in.DeleteAfterRun == nil && j.Schedule.Kind == cronspec.KindAt {
		j.DeleteAfterRun = true // OpenClaw: one-shots delete after success by default
	}
	if err := s.check(ctx, &j); err != nil {
		return nil, err
	}
	if err := s.Jobs.Create(ctx, &j); err != nil {
		return nil, fmt.Errorf("store cron job: %w", err)
	}
	if err := s.schedule(ctx, &j); err != nil {
		_ = s.Jobs.Delete(context.WithoutCancel(ctx), j.ID)
		return nil, err
	}
	return &j, nil
}

// Edit applies OpenClaw's cron.update patch (JSON, the job's own fields)
// to a job: the result is checked whole, stored, and its schedule
// replaced (or removed when disabled).
func (s *Service) Edit(ctx context.Context, id string, patch []byte) (*cronjobs.Job, error) {
	cur, _, err := s.Jobs.Get(ctx, id)
	if err != nil {
		return nil, notFound(err, id)
	}
	next := *cur
	if next.Delivery != nil {
		d := *next.Delivery
		next.Delivery = &d
	}
	if err := json.Unmarshal(patch, &next); err != nil {
		return nil, bad("cron edit: the patch is not valid JSON: %v", err)
	}
	next.ID, next.CreatedAtMs, next.State = cur.ID, cur.CreatedAtMs, cur.State
	if err := s.check(ctx, &next); err != nil {
		return nil, err
	}
	return s.store(ctx, id, &next)
}

// SetEnabled enables or disables a job: disabling removes its schedule and
// any tick not yet taken, so it stops within one tick.
func (s *Service) SetEnabled(ctx context.Context, id string, on bool) (*cronjobs.Job, error) {
	cur, _, err := s.Jobs.Get(ctx, id)
	if err != nil {
		return nil, notFound(err, id)
	}
	next := *cur
	next.Enabled = on
	if on && next.Schedule.Kind == cronspec.KindAt {
		if err := cronspec.Schedule(next.Schedule).Validate(0, s.now()); err != nil {
			return nil, bad("%v", err)
		}
	}
	return s.store(ctx, id, &next)
}

// store writes next over the job (its run state kept) and replaces its
// schedule; should the server refuse the schedule, the job is written
// back as it was, so job and schedule never disagree.
func (s *Service) store(ctx context.Context, id string, next *cronjobs.Job) (*cronjobs.Job, error) {
	next.UpdatedAtMs = s.now().UnixMilli()
	var prev cronjobs.Job
	put := func(v *cronjobs.Job) (*cronjobs.Job, error) {
		return s.Jobs.Update(ctx, id, func(cur *cronjobs.Job) error {
			state := cur.State
			if v == next {
				prev = *cur
			}
			*cur = *v
			cur.State = state
			return nil
		})
	}
	j, err := put(next)
	if err != nil {
		return nil, notFound(err, id)
	}
	if err := s.schedule(ctx, j); err != nil {
		if _, rerr := put(&prev); rerr != nil {
			s.log().Warn("cron: restoring the job after its schedule failed", "job", id, "err", rerr)
		}
		return nil, err
	}
	return j, nil
}

// Remove deletes a job: its schedule first, so it never fires again.
func (s *Service) Remove(ctx context.Context, id string) error {
	return notFound(s.remove(ctx, id), id)
}

func (s *Service) remove(ctx context.Context, id string) error {
	if _, _, err := s.Jobs.Get(ctx, id); err != nil {
		return err
	}
	if err := s.Ticks.Remove(ctx, id); err != nil {
		return err
	}
	return s.Jobs.Delete(ctx, id)
}

// RunNow queues a run of the job now (OpenClaw's cron run, force mode):
// a tick of its own, taken by any worker as the scheduled ones are. It
// returns the run id.
func (s *Service) RunNow(ctx context.Context, id string) (string, error) {
	if _, _, err := s.Jobs.Get(ctx, id); err != nil {
		return "", notFound(err, id)
	}
	manual := uuid.NewString()
	if err := s.Ticks.Fire(ctx, id, manual, tickBody(id)); err != nil {
		return "", err
	}
	return runID(id, "manual-"+manual), nil
}

// JobView is a job as list shows it: its next tick and its last run's
// outcome.
type JobView struct {
	*cronjobs.Job
	NextRunAtMs int64 `json:"nextRunAtMs,omitempty"`
	Scheduled   bool  `json:"scheduled"`
}

// List returns every job with its next tick and last outcome.
func (s *Service) List(ctx context.Context) ([]JobView, error) {
	jobs, err := s.Jobs.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]JobView, 0, len(jobs))
	for _, j := range jobs {
		v := JobView{Job: j}
		if j.Enabled {
			if n := cronspec.Schedule(j.Schedule).Next(s.now()); !n.IsZero() {
				v.NextRunAtMs = n.UnixMilli()
			}
		}
		if v.Scheduled, err = s.Ticks.Scheduled(ctx, j.ID); err != nil {
			return nil, err
		}
		if j.State.LastRunID != "" {
			if rec, _, err := s.Runs.Get(ctx, j.State.LastRunID); err == nil {
				j.State.LastStatus, j.State.LastError = outcome(rec), rec.Error
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// RunView is one history entry with its run's outcome.
type RunView struct {
	*cronjobs.Run
	Outcome string `json:"outcome"` // queued | running | ok | error | timeout | killed | unknown
	Reply   string `json:"reply,omitempty"`
	EndedAt int64  `json:"endedAtMs,omitempty"`
}

// RunsOf is a job's run history, newest first, at most limit (0: all).
func (s *Service) RunsOf(ctx context.Context, id string, limit int) ([]RunView, error) {
	if _, _, err := s.Jobs.Get(ctx, id); err != nil {
		return nil, notFound(err, id)
	}
	hist, err := s.Jobs.Runs(ctx, id)
	if err != nil {
		return nil, err
	}
	slices.Reverse(hist)
	if limit > 0 && len(hist) > limit {
		hist = hist[:limit]
	}
	out := make([]RunView, 0, len(hist))
	for _, h := range hist {
		v := RunView{Run: h, Outcome: "unknown"}
		if rec, _, err := s.Runs.Get(ctx, h.RunID); err == nil {
			v.Outcome, v.Reply, v.EndedAt = outcome(rec), rec.Reply, rec.EndedAt
		}
		out = append(out, v)
	}
	return out, nil
}

func outcome(rec *runs.Record) string {
	if rec.Status == runs.Pending {
		return "queued"
	}
	return rec.Status
}

func notFound(err error, id string) error {
	if errors.Is(err, cronjobs.ErrNotFound) {
		return bus.Errorf(bus.CodeNotFound, "unknown cron job id: %s (sessionbus cron list shows them)", id)
	}
	return err
}

// check normalizes j and refuses what OpenClaw refuses, with its texts
// where it has them; nothing is written before it passes.
func (s *Service) check(ctx context.Context, j *cronjobs.Job) error {
	j.Name = trimName(j.Name)
	if j.Name == "" {
		return bad("cron job needs a name (--name)")
	}
	if j.AgentID == "" {
		j.AgentID = rules.DefaultAgentID
	}
	id, err := rules.ValidateAgentIDInput("agentId", j.AgentID)
	if err != nil {
		return bad("%v", err)
	}
	j.AgentID = id
	if len(s.Config.Agents.List) > 0 && s.Config.Agent(id) == nil {
		var ids []string
		for _, a := range s.Config.Agents.List {
			ids = append(ids, a.ID)
		}
		return bad("unknown agent %q: agents.list has %s; pass one of them with --agent", id, strings.Join(ids, ", "))
	}
	if err := checkTarget(j); err != nil {
		return err
	}
	if err := s.checkDelivery(ctx, j); err != nil {
		return err
	}
	floor, _ := s.Config.Cron.MinIntervalDuration() // validated when the config loaded
	if err := cronspec.Schedule(j.Schedule).Validate(floor, s.now()); err != nil {
		return bad("%v", err)
	}
	normalizeSchedule(&j.Schedule)
	return nil
}

func checkTarget(j *cronjobs.Job) error {
	if j.SessionTarget == "" {
		j.SessionTarget = TargetIsolated
		if j.Payload.Kind == PayloadEvent {
			j.SessionTarget = TargetMain
		}
	}
	if j.Payload.Kind == "" {
		j.Payload.Kind = map[string]string{TargetMain: PayloadEvent, TargetIsolated: PayloadTurn}[j.SessionTarget]
	}
	switch j.WakeMode {
	case "":
		j.WakeMode = WakeNow
	case WakeNow, WakeNextBeat:
	default:
		return bad("wakeMode %q: use now or next-heartbeat", j.WakeMode)
	}
	switch j.SessionTarget {
	case TargetMain:
		if j.Payload.Kind != PayloadEvent {
			return bad(`main cron jobs require payload.kind="systemEvent"`)
		}
		if strings.TrimSpace(j.Payload.Text) == "" {
			return bad("a main-session job needs the event text (--system-event)")
		}
		j.Payload.Message = ""
	case TargetIsolated:
		if j.Payload.Kind != PayloadTurn {
			return bad(`isolated cron jobs require payload.kind="agentTurn"`)
		}
		if strings.TrimSpace(j.Payload.Message) == "" {
			return bad("an isolated job needs the turn's message (--message)")
		}
		j.Payload.Text = ""
	default:
		return bad(`sessionTarget %q is not supported: use "main" or "isolated"`, j.SessionTarget)
	}
	return nil
}

// checkDelivery defaults an isolated job's delivery to announce (as
// OpenClaw does) and refuses a channel no adapter serves: its reply would
// wait in the deliveries stream for a reader that does not exist.
func (s *Service) checkDelivery(ctx context.Context, j *cronjobs.Job) error {
	if j.SessionTarget == TargetMain {
		if j.Delivery != nil && j.Delivery.Mode != DeliveryNone {
			return bad(`cron channel delivery config is only supported for sessionTarget="isolated"`)
		}
		j.Delivery = nil
		return nil
	}
	if j.Delivery == nil {
		j.Delivery = &cronjobs.Delivery{Mode: DeliveryAnnounce}
	}
	switch j.Delivery.Mode {
	case DeliveryNone:
		j.Delivery.Channel, j.Delivery.To = "", ""
		return nil
	case DeliveryAnnounce, "":
		j.Delivery.Mode = DeliveryAnnounce
	case "webhook":
		return bad(`delivery mode "webhook" is not supported: use --announce with a channel whose adapter posts it (sessionbus adapter webhook), or --no-deliver`)
	default:
		return bad("delivery mode %q: use announce or none", j.Delivery.Mode)
	}
	ch := strings.ToLower(strings.TrimSpace(j.Delivery.Channel))
	j.Delivery.Channel = ch
	if ch == "" || ch == "last" {
		return nil
	}
	_, err := s.JS.Consumer(ctx, s.Names.DeliverStream(), deliveries.SubjectToken(ch))
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return bad("delivery channel %q has no adapter: start one for it (sessionbus adapter webhook --channel %s) or pass --no-deliver", ch, ch)
	}
	if err != nil {
		return fmt.Errorf("look up the adapter of channel %s: %w", ch, err)
	}
	return nil
}

// normalizeSchedule drops the fields another kind left behind (an edit
// from every to cron keeps no everyMs).
func normalizeSchedule(sc *cronjobs.Schedule) {
	switch sc.Kind {
	case cronspec.KindAt:
		sc.EveryMs, sc.Expr = 0, ""
	case cronspec.KindEvery:
		sc.At, sc.Expr, sc.Tz = "", "", ""
	case cronspec.KindCron:
		sc.At, sc.EveryMs = "", 0
	}
}
