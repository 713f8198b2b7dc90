// Package cron is OpenClaw's cron on JetStream: jobs (kv/cronjobs) whose
// schedules are the server's scheduled messages (streams/crontick), the
// run each tick starts once across every worker (Runner), the job
// operations with OpenClaw's checks (Service), and the reaper of old cron
// run sessions (Reap).
package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/submit"
	"github.com/sessionbus/sessionbus/kv/cronjobs"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/cronspec"
	"github.com/sessionbus/sessionbus/streams/crontick"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// Session targets, payload kinds, wake modes and delivery modes: OpenClaw's
// words.
const (
	TargetMain       = "main"
	TargetIsolated   = "isolated"
	PayloadTurn      = "agentTurn"
	PayloadEvent     = "systemEvent"
	WakeNow          = "now"
	WakeNextBeat     = "next-heartbeat"
	DeliveryAnnounce = "announce"
	DeliveryNone     = "none"
)

// lane is the gateway lane cron runs take (OpenClaw runs cron in its own).
const lane = "cron"

// Service holds what the cron operations and the tick runner use.
type Service struct {
	Jobs    *cronjobs.Jobs
	Ticks   *crontick.Ticks
	Starter *submit.Starter
	Runs    *runs.Records
	Store   *sessions.Store
	// JS and Names find the channels that have an adapter (a durable
	// consumer of that name on the deliveries stream).
	JS     jetstream.JetStream
	Names  bus.Names
	Config *config.Config
	// Signals, when set, gets a run_completed or run_failed event for each
	// run's end, on the job's session (isolated) or the main session.
	Signals *signals.Log
	Log     *slog.Logger
	Now     func() time.Time

	bg background // following started runs to their end
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// tickBody is what each scheduled message carries: the job it fires
// (the subject says so too; the body keeps a tick readable on its own).
func tickBody(jobID string) []byte { return []byte(`{"jobId":"` + jobID + `"}`) }

// schedule puts the job's schedule in the stream when it is enabled, and
// takes it out when it is not.
func (s *Service) schedule(ctx context.Context, j *cronjobs.Job) error {
	if !j.Enabled {
		return s.Ticks.Remove(ctx, j.ID)
	}
	pattern, tz := cronspec.Schedule(j.Schedule).Pattern()
	return s.Ticks.Put(ctx, j.ID, pattern, tz, tickBody(j.ID))
}

// runID is a tick's run id: the same on every worker that takes the tick,
// so the run record's create lets one of them start it.
func runID(jobID, tick string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("sessionbus-cron:"+jobID+"|"+tick)).String()
}

// tickKey names a tick of j; a one-shot's is its time, so a job moved to
// another time runs again.
func tickKey(j *cronjobs.Job, tk *crontick.Tick) string {
	if tk.Key == "at" {
		t, _ := cronspec.Schedule(j.Schedule).AtTime()
		return "at-" + t.Format(time.RFC3339)
	}
	return tk.Key
}

// scheduledAt is when the tick fell due: the at time, the fire before
// Next for an interval, else the second the server stored it in.
func scheduledAt(j *cronjobs.Job, tk *crontick.Tick) time.Time {
	switch {
	case tk.Manual:
		return tk.Stored
	case j.Schedule.Kind == cronspec.KindAt:
		t, _ := cronspec.Schedule(j.Schedule).AtTime()
		return t
	case j.Schedule.Kind == cronspec.KindEvery && !tk.Next.IsZero():
		return tk.Next.Add(-time.Duration(j.Schedule.EveryMs) * time.Millisecond)
	}
	return tk.Stored.Truncate(time.Second)
}

// HandleTick starts the run of one tick, once: a tick taken twice (a
// redelivery, a second copy after a failover) finds the run record its
// first taker created and starts nothing.
func (s *Service) HandleTick(ctx context.Context, tk *crontick.Tick) error {
	j, _, err := s.Jobs.Get(ctx, tk.JobID)
	if errors.Is(err, cronjobs.ErrNotFound) {
		return nil // removed after the tick was stored
	}
	if err != nil {
		return err
	}
	if !j.Enabled && !tk.Manual {
		return nil // disabled after the tick was stored
	}
	key := tickKey(j, tk)
	id := runID(j.ID, key)
	alias := rules.ResolveAlias(s.Config.Session.MainKey, s.Config.Session.Scope)
	now := s.now()
	req := &runsRequest{job: j, runID: id, at: now, mainKey: alias.MainSessionKey(j.AgentID)}
	rq, route := req.build(s.lastRoute(ctx, req.mainKey, j))
	rec := &runs.Record{
		RunID: id, SessionKey: rq.SessionKey, AgentID: rq.AgentID, Status: runs.Pending,
		CreatedAt: now.UnixMilli(), ChainID: id, IdempotencyKey: "cron:" + j.ID + ":" + key,
	}
	q, err := s.Starter.Start(ctx, "cron", rq, rec, false)
	if err != nil {
		return fmt.Errorf("start the run of cron job %s: %w", j.ID, err)
	}
	q.Stop()
	h := &cronjobs.Run{
		JobID: j.ID, Tick: key, ScheduleAt: scheduledAt(j, tk).UnixMilli(), RunID: id, SessionKey: rq.SessionKey,
		Manual: tk.Manual, StartedAt: now.UnixMilli(), Status: "queued", Session: j.SessionTarget,
	}
	if route != nil {
		h.Delivered = route.Channel + ":" + route.To
	}
	if err := s.Jobs.AddRun(ctx, h); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		s.log().Warn("cron: run history", "job", j.ID, "run", id, "err", err)
	}
	if q.Repeat {
		return nil // its first taker did the rest
	}
	report := req.mainKey // where the run's outcome is logged
	if j.SessionTarget == TargetIsolated {
		s.touchJobSession(ctx, j, now)
		report = JobSessionKey(j)
	}
	return s.afterStart(ctx, j, id, key, report, now)
}

// afterStart records the run on the job (a one-shot that keeps itself
// is disabled: it ran) and follows the run to its end.
func (s *Service) afterStart(ctx context.Context, j *cronjobs.Job, id, key, sessionKey string, now time.Time) error {
	_, err := s.Jobs.Update(ctx, j.ID, func(cur *cronjobs.Job) error {
		cur.State.LastRunAtMs, cur.State.LastRunID, cur.State.LastTick = now.UnixMilli(), id, key
		cur.State.LastStatus, cur.State.LastError = "queued", ""
		if j.Schedule.Kind == cronspec.KindAt && !cur.DeleteAfterRun {
			cur.Enabled = false
		}
		return nil
	})
	if errors.Is(err, cronjobs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.follow(j, id, sessionKey)
	return nil
}

// lastRoute is where an announce without a channel goes: the main
// session's last route (OpenClaw's channel "last"); nil when none.
func (s *Service) lastRoute(ctx context.Context, mainKey string, j *cronjobs.Job) *cronjobs.Delivery {
	d := j.Delivery
	if j.SessionTarget != TargetIsolated || d == nil || d.Mode != DeliveryAnnounce {
		return nil
	}
	if d.Channel != "" && d.Channel != "last" {
		return d
	}
	e, _, err := s.Store.Get(ctx, mainKey)
	if err != nil || e.LastChannel == "" {
		return nil
	}
	return &cronjobs.Delivery{Mode: DeliveryAnnounce, Channel: e.LastChannel, To: rules.FirstNonEmpty(d.To, e.LastTo)}
}

// touchJobSession keeps the job's own session (agent:<id>:cron:<jobId>)
// listed, most recent run first: the run sessions are hidden from
// sessions_list, as in OpenClaw, the job's is not.
func (s *Service) touchJobSession(ctx context.Context, j *cronjobs.Job, now time.Time) {
	key := JobSessionKey(j)
	ms := now.UnixMilli()
	_, err := s.Store.Create(ctx, &sessions.Entry{
		Key: key, AgentID: j.AgentID, SessionID: sessions.NewID(), CreatedAt: ms, UpdatedAt: ms, DisplayName: j.Name,
	})
	if errors.Is(err, sessions.ErrExists) {
		_, _, err = s.Store.Update(ctx, key, func(e *sessions.Entry) error {
			e.UpdatedAt, e.DisplayName = max(e.UpdatedAt, ms), j.Name
			return nil
		})
	}
	if err != nil {
		s.log().Warn("cron: the job's session", "job", j.ID, "key", key, "err", err)
	}
}

// JobSessionKey is the job's own session, agent:<agentId>:cron:<jobId>.
func JobSessionKey(j *cronjobs.Job) string {
	return "agent:" + rules.NormalizeAgentID(j.AgentID) + ":cron:" + j.ID
}

// RunSessionKey is the session one isolated run's turn runs in,
// agent:<agentId>:cron:<jobId>:run:<runId>: a fresh session each run.
func RunSessionKey(j *cronjobs.Job, id string) string { return JobSessionKey(j) + ":run:" + id }

// trimName keeps a job's name one line.
func trimName(v string) string { return strings.Join(strings.Fields(v), " ") }
