// Package crontick is the stream SB_CRON: each cron job's schedule as one
// scheduled message on <prefix>.cron.sched.<jobId> (JetStream message
// schedules, nats-server 2.12 or later), and the ticks the server
// publishes from it to <prefix>.cron.tick.<jobId>. Workers read the ticks
// through one durable consumer, so each tick goes to one worker and a
// tick survives the workers being down.
//
// The stream keeps one message per subject: the schedule (replaced by an
// edit), and the job's latest tick. Ticks that fell due while no worker
// read them are thus collapsed into one, which is OpenClaw's catch-up
// rule: a job that missed runs while the gateway was down runs once.
package crontick

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Consumer is the durable consumer the workers share.
const Consumer = "cron-workers"

// AckWait is how long a worker holds a tick before another gets it: the
// run start is a few writes, never long.
const AckWait = 30 * time.Second

// Headers of the scheduler (nats-server's names) and of a manual run.
const (
	hdrSchedule     = "Nats-Schedule"
	hdrScheduleTz   = "Nats-Schedule-Time-Zone"
	hdrScheduleTo   = "Nats-Schedule-Target"
	hdrScheduleNext = "Nats-Schedule-Next"
	hdrManual       = "Sb-Cron-Manual"
)

// Ticks is the stream.
type Ticks struct {
	bus.StreamConfig // recreated by bus.Guard
	js               jetstream.JetStream
	st               jetstream.Stream
	names            bus.Names
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new stream.
var WithReplicas = bus.WithReplicas

// Open creates SB_CRON if absent; an existing stream keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Ticks, error) {
	o := bus.ApplyStoreOptions(opts)
	cfg := jetstream.StreamConfig{
		Name:              names.CronStream(),
		Description:       "sessionbus cron schedules (scheduled messages) and their ticks",
		Subjects:          []string{names.CronSchedule("*"), names.CronTick("*")},
		Storage:           jetstream.FileStorage,
		Replicas:          max(o.Replicas, 1),
		MaxMsgsPerSubject: 1,
		AllowMsgSchedules: true,
		AllowRollup:       true, // the server requires it with schedules
	}
	st, opened, err := bus.OpenStream(ctx, js, cfg)
	if err != nil {
		return nil, fmt.Errorf("cron stream (needs nats-server 2.12 or later for message schedules): %w", err)
	}
	return &Ticks{StreamConfig: opened, js: js, st: st, names: names}, nil
}

// Put stores job's schedule, replacing any earlier one: pattern and tz
// are the Nats-Schedule and Nats-Schedule-Time-Zone values (tz "" for
// none); body is copied into every tick.
func (t *Ticks) Put(ctx context.Context, jobID, pattern, tz string, body []byte) error {
	m := nats.NewMsg(t.names.CronSchedule(jobID))
	m.Header.Set(hdrSchedule, pattern)
	m.Header.Set(hdrScheduleTo, t.names.CronTick(jobID))
	if tz != "" {
		m.Header.Set(hdrScheduleTz, tz)
	}
	m.Data = body
	if _, err := t.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("schedule cron job %s (%q): %w", jobID, pattern, err)
	}
	return nil
}

// Remove drops job's schedule and any tick not yet taken, so a disabled or
// removed job does not fire again.
func (t *Ticks) Remove(ctx context.Context, jobID string) error {
	for _, subj := range []string{t.names.CronSchedule(jobID), t.names.CronTick(jobID)} {
		if err := t.st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return fmt.Errorf("unschedule cron job %s: %w", jobID, err)
		}
	}
	return nil
}

// Scheduled reports whether job has a schedule in the stream.
func (t *Ticks) Scheduled(ctx context.Context, jobID string) (bool, error) {
	_, err := t.st.GetLastMsgForSubject(ctx, t.names.CronSchedule(jobID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Fire publishes a tick now (cron run): manualID names it, so it runs
// once however often it is redelivered.
func (t *Ticks) Fire(ctx context.Context, jobID, manualID string, body []byte) error {
	m := nats.NewMsg(t.names.CronTick(jobID))
	m.Header.Set(hdrManual, manualID)
	m.Data = body
	if _, err := t.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("run cron job %s: %w", jobID, err)
	}
	return nil
}

// Tick is one tick as a worker takes it.
type Tick struct {
	JobID string
	// Key names the tick for idempotency: the scheduler's
	// Nats-Schedule-Next (the fire time after this one, the same on every
	// copy of this tick, whichever server published it), "at" for a
	// one-shot, the manual id for a cron run.
	Key    string
	Next   time.Time // the next fire time (zero: none, a one-shot)
	Stored time.Time // when the tick was stored (the server's clock)
	Manual bool
	Body   []byte
}

// Consume creates the shared consumer within ctx, then hands each tick to
// fn until the returned context is stopped; fn's nil acks it, an error has
// it redelivered (to any worker) after a short delay.
//
// Each worker asks for one tick at a time: the server hands a pull
// request's whole batch to whoever sent it, so a SIGKILLed worker's
// outstanding request would swallow every tick until it expired (the
// client's 30 s), and a job firing each second would miss them all.
// With one, a dead worker costs the one tick it was sent.
// A lost pull is asked again soon (bus.PullHeartbeat).
func (t *Ticks) Consume(ctx context.Context, fn func(context.Context, *Tick) error, log func(msg string, args ...any)) (jetstream.ConsumeContext, error) {
	c, err := t.js.CreateOrUpdateConsumer(ctx, t.names.CronStream(), jetstream.ConsumerConfig{
		Durable:       Consumer,
		Description:   "sessionbus workers: cron ticks, each to one worker",
		FilterSubject: t.names.CronTick("*"),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("cron tick consumer: %w", err)
	}
	run := context.WithoutCancel(ctx) // ticks outlive the start-up bound
	return c.Consume(func(m jetstream.Msg) {
		tk, perr := parse(t.names, m)
		if perr != nil {
			log("cron: dropping a malformed tick", "subject", m.Subject(), "err", perr)
			_ = m.Term()
			return
		}
		// bounded by the ack wait: past it the tick is another worker's
		tctx, cancel := context.WithTimeout(run, AckWait)
		err := fn(tctx, tk)
		cancel()
		if err != nil {
			log("cron: tick not handled, will retry", "job", tk.JobID, "tick", tk.Key, "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		}
		_ = m.Ack()
	}, jetstream.PullMaxMessages(1), jetstream.PullExpiry(bus.PullExpiry), jetstream.PullHeartbeat(bus.PullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			log("cron: tick consumer", "err", err)
		}))
}

func parse(names bus.Names, m jetstream.Msg) (*Tick, error) {
	jobID, ok := strings.CutPrefix(m.Subject(), names.CronTick(""))
	if !ok || jobID == "" {
		return nil, errors.New("not a tick subject")
	}
	md, err := m.Metadata()
	if err != nil {
		return nil, err
	}
	tk := &Tick{JobID: jobID, Stored: md.Timestamp, Body: m.Data()}
	h := m.Headers()
	switch next := h.Get(hdrScheduleNext); {
	case h.Get(hdrManual) != "":
		tk.Key, tk.Manual = "manual-"+h.Get(hdrManual), true
	case next == "purge":
		tk.Key = "at"
	case next != "":
		if tk.Next, err = time.Parse(time.RFC3339Nano, next); err != nil {
			return nil, fmt.Errorf("bad %s %q: %w", hdrScheduleNext, next, err)
		}
		tk.Key = tk.Next.UTC().Format(time.RFC3339)
	default:
		return nil, fmt.Errorf("a tick without %s or %s", hdrScheduleNext, hdrManual)
	}
	return tk, nil
}
