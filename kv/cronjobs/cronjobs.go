// Package cronjobs is the `cronjobs` bucket: the cron jobs as OpenClaw
// defines them (job.<id>), and each job's run history (run.<id>.<tick>,
// one entry per tick that started a run, kept RunHistoryTTL by a per-key
// TTL). The schedule itself lives in the server's message scheduler
// (streams/crontick); this bucket is what a job is and what it did.
package cronjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// RunHistoryTTL is how long a run's history entry stays (OpenClaw prunes
// its run log by size; a TTL bounds this bucket the same way).
const RunHistoryTTL = 30 * 24 * time.Hour

// Schedule is OpenClaw's schedule object (rules/cronspec validates it and
// converts to it: the fields are the same).
type Schedule struct {
	Kind    string `json:"kind"`
	At      string `json:"at,omitempty"`
	EveryMs int64  `json:"everyMs,omitempty"`
	Expr    string `json:"expr,omitempty"`
	Tz      string `json:"tz,omitempty"`
}

// Payload is what a run does: agentTurn (Message, an isolated turn) or
// systemEvent (Text, into the main session).
type Payload struct {
	Kind           string `json:"kind"`
	Message        string `json:"message,omitempty"`
	Text           string `json:"text,omitempty"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty"`
}

// Delivery is where an isolated run's reply goes: mode announce (to
// Channel/To) or none.
type Delivery struct {
	Mode       string `json:"mode"`
	Channel    string `json:"channel,omitempty"`
	To         string `json:"to,omitempty"`
	BestEffort bool   `json:"bestEffort,omitempty"`
}

// State is what the job's runs left: OpenClaw's job.state.
type State struct {
	LastRunAtMs int64  `json:"lastRunAtMs,omitempty"`
	LastRunID   string `json:"lastRunId,omitempty"`
	LastTick    string `json:"lastTick,omitempty"`
	LastStatus  string `json:"lastStatus,omitempty"` // queued | ok | error | timeout | killed
	LastError   string `json:"lastError,omitempty"`
}

// Job is one cron job.
type Job struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Description    string    `json:"description,omitempty"`
	AgentID        string    `json:"agentId"`
	Enabled        bool      `json:"enabled"`
	DeleteAfterRun bool      `json:"deleteAfterRun,omitempty"`
	Schedule       Schedule  `json:"schedule"`
	SessionTarget  string    `json:"sessionTarget"` // main | isolated
	WakeMode       string    `json:"wakeMode"`      // now | next-heartbeat
	Payload        Payload   `json:"payload"`
	Delivery       *Delivery `json:"delivery,omitempty"`
	CreatedAtMs    int64     `json:"createdAtMs"`
	UpdatedAtMs    int64     `json:"updatedAtMs"`
	State          State     `json:"state"`
}

// Run is one history entry: a tick that started a run (or a manual run).
type Run struct {
	JobID      string `json:"jobId"`
	Tick       string `json:"tick"`               // the tick's identity (idempotency)
	ScheduleAt int64  `json:"scheduledAtMs"`      // when the tick was due
	RunID      string `json:"runId"`              // the run record (kv/runs)
	SessionKey string `json:"sessionKey"`         // where the turn ran
	Manual     bool   `json:"manual,omitempty"`   // cron run, not a tick
	StartedAt  int64  `json:"startedAtMs"`        // when the run was queued
	Status     string `json:"status"`             // queued | error
	Error      string `json:"error,omitempty"`    // why it could not be queued
	Delivered  string `json:"delivery,omitempty"` // announce target, if any
	Session    string `json:"sessionTarget,omitempty"`
}

// ErrNotFound is a job that does not exist.
var ErrNotFound = errors.New("cron job not found")

// Jobs is the bucket.
type Jobs struct {
	bus.KVConfig // recreated by bus.Guard
	jobs         record.Bucket[Job]
	runs         record.Bucket[Run]
	kv           jetstream.KeyValue
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// Open creates the bucket if absent; an existing one keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Jobs, error) {
	o := bus.ApplyStoreOptions(opts)
	cfg := jetstream.KeyValueConfig{
		Bucket:         names.CronJobsBucket(),
		Description:    "sessionbus cron jobs and their run history",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       max(o.Replicas, 1),
		LimitMarkerTTL: time.Minute, // per-key TTLs: the run history ages out
	}
	kv, opened, err := bus.OpenKV(ctx, js, cfg)
	if err != nil {
		return nil, fmt.Errorf("cronjobs bucket: %w", err)
	}
	return &Jobs{KVConfig: opened, kv: kv, jobs: record.New[Job](kv, js, "cron job"), runs: record.New[Run](kv, js, "cron run")}, nil
}

func jobKey(id string) string       { return "job." + id }
func runKey(id, tick string) string { return "run." + id + "." + tickToken(tick) }
func runPrefix(id string) string    { return "run." + id + "." }
func tickToken(tick string) string {
	return strings.NewReplacer(":", "-", ".", "_", "+", "p").Replace(tick)
}
func isJobKey(k string) (string, bool) { return strings.CutPrefix(k, "job.") }

// Create stores a new job; jetstream.ErrKeyExists when its id is taken.
func (j *Jobs) Create(ctx context.Context, job *Job) error {
	_, err := j.jobs.Create(ctx, jobKey(job.ID), job)
	return err
}

// Get returns the job and its revision; ErrNotFound when none.
func (j *Jobs) Get(ctx context.Context, id string) (*Job, uint64, error) {
	job, rev, err := j.jobs.Get(ctx, jobKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return job, rev, err
}

// Update changes a job by compare-and-set (record.Update); ErrNotFound when
// it does not exist.
func (j *Jobs) Update(ctx context.Context, id string, fn func(*Job) error) (*Job, error) {
	job, _, err := j.jobs.Update(ctx, jobKey(id), nil, 0, fn)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return job, err
}

// Delete removes a job and its history; ErrNotFound when it does not
// exist.
func (j *Jobs) Delete(ctx context.Context, id string) error {
	if _, _, err := j.Get(ctx, id); err != nil {
		return err
	}
	if err := j.kv.Purge(ctx, jobKey(id)); err != nil {
		return fmt.Errorf("delete cron job %s: %w", id, err)
	}
	runs, err := j.Runs(ctx, id)
	if err != nil {
		return err
	}
	for _, r := range runs {
		_ = j.kv.Purge(ctx, runKey(id, r.Tick)) // history: best effort, it ages out anyway
	}
	return nil
}

// List returns every job, by creation time.
func (j *Jobs) List(ctx context.Context) ([]*Job, error) {
	keys, err := j.keys(ctx, "job.*")
	if err != nil {
		return nil, err
	}
	var out []*Job
	for _, k := range keys {
		id, _ := isJobKey(k)
		job, _, err := j.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, job)
	}
	slices.SortFunc(out, func(a, b *Job) int { return int(a.CreatedAtMs - b.CreatedAtMs) })
	return out, nil
}

// AddRun records a run of a tick; jetstream.ErrKeyExists when that tick
// has one already.
func (j *Jobs) AddRun(ctx context.Context, r *Run) error {
	_, err := j.kv.Create(ctx, runKey(r.JobID, r.Tick), mustJSON(r), jetstream.KeyTTL(RunHistoryTTL))
	return err
}

// Runs returns a job's run history, oldest first.
func (j *Jobs) Runs(ctx context.Context, id string) ([]*Run, error) {
	keys, err := j.keys(ctx, runPrefix(id)+">")
	if err != nil {
		return nil, err
	}
	var out []*Run
	for _, k := range keys {
		r, _, err := j.runs.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Run) int { return int(a.StartedAt - b.StartedAt) })
	return out, nil
}

func (j *Jobs) keys(ctx context.Context, filter string) ([]string, error) {
	lister, err := j.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", filter, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v) // plain structs of strings and numbers: cannot fail
	return b
}
