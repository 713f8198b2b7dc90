// Package quota is the per-caller rate limits of a worker (`quotas` in the
// config): token buckets per session and per agent, one set for tool calls
// and one for runs queued. A call over a limit is refused with a 429 that
// says when to retry; other callers' buckets are untouched. A caller that
// comes back before its wait is over gets its next 429 late (bus.Error's
// Hold), so a loop that ignores the wait runs at the pace of its quota.
//
// Limits are per worker process. Workers are stateless and any number may
// run, each taking a share of the requests, so N workers allow a caller up
// to N times the configured rate. A shared count would make every call
// wait for a JetStream write (a quorum write on a cluster) before its
// handler runs; the limits exist to stop a runaway, which a per-worker
// bucket does for under a microsecond per call (BenchmarkToolCall: 0.6 µs
// a call that passes, 0.9 µs one refused, on the 2-core development VM).
package quota

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/rules"
)

// Kinds name the four limits as the config does; they are the kind label
// of the sessionbus_quota_refused_total metric.
const (
	ToolCallsPerSession = "toolCallsPerSession"
	ToolCallsPerAgent   = "toolCallsPerAgent"
	RunsPerSession      = "runsPerSession"
	RunsPerAgent        = "runsPerAgent"
)

// Kinds is every kind, in the config's order.
var Kinds = []string{ToolCallsPerSession, ToolCallsPerAgent, RunsPerSession, RunsPerAgent}

// Limits are one worker's quotas. Safe for concurrent use; a nil *Limits
// allows everything.
type Limits struct {
	now     func() time.Time
	refused func(kind string)
	limits  map[string]*limit
}

// limit is one configured quota and its buckets (nil when unlimited).
type limit struct {
	kind string
	q    config.Quota
	b    *buckets
}

// Observer is told of every refusal, by kind (metrics.Metrics is one).
type Observer interface {
	QuotaRefused(kind string)
}

// Option adjusts New.
type Option func(*options)

type options struct {
	now     func() time.Time
	refused func(string)
	maxKeys int
}

// WithClock reads the time from now instead of time.Now (tests: a clock
// that only moves when told makes refusals deterministic).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// OnRefused is told the kind of every refusal (metrics).
func OnRefused(f func(kind string)) Option { return func(o *options) { o.refused = f } }

// WithMaxKeys bounds the buckets each limit keeps (default DefaultMaxKeys).
func WithMaxKeys(n int) Option { return func(o *options) { o.maxKeys = n } }

// New makes the limits of q (already validated by the config loader).
func New(q config.Quotas, opts ...Option) *Limits {
	o := options{now: time.Now, refused: func(string) {}, maxKeys: DefaultMaxKeys}
	for _, opt := range opts {
		opt(&o)
	}
	o.maxKeys = max(o.maxKeys, 1)
	l := &Limits{now: o.now, refused: o.refused, limits: map[string]*limit{}}
	for kind, cq := range map[string]config.Quota{
		ToolCallsPerSession: q.ToolCallsPerSession, ToolCallsPerAgent: q.ToolCallsPerAgent,
		RunsPerSession: q.RunsPerSession, RunsPerAgent: q.RunsPerAgent,
	} {
		lim := &limit{kind: kind, q: cq}
		if !cq.Unlimited() {
			lim.b = newBuckets(cq.Rate, cq.Burst, o.maxKeys)
		}
		l.limits[kind] = lim
	}
	return l
}

// ToolCall admits one tool call of session key, or refuses it with a 429.
func (l *Limits) ToolCall(key string) *bus.Error {
	return l.admit(key, "tool calls", ToolCallsPerSession, ToolCallsPerAgent)
}

// Run admits one run queued by (or, for a human turn, for) session key, or
// refuses it with a 429.
func (l *Limits) Run(key string) *bus.Error {
	return l.admit(key, "runs queued", RunsPerSession, RunsPerAgent)
}

// ToolCallBy is ToolCall for the bus service's check (bus.ServiceOptions.Quota).
func (l *Limits) ToolCallBy(c bus.Caller) *bus.Error { return l.ToolCall(c.SessionKey) }

// admit takes a token from the session's bucket, then from its agent's
// (the agent comes from the key, the one rule every tool uses); when the
// agent's refuses, the session's token is given back, so a refused call
// costs nothing.
func (l *Limits) admit(key, what, perSession, perAgent string) *bus.Error {
	if l == nil {
		return nil
	}
	now := l.now()
	key = strings.ToLower(key) // keys compare without case
	s, a := l.limits[perSession], l.limits[perAgent]
	var held *rate.Reservation
	if s.b != nil {
		r, wait, early := s.b.take(key, now)
		if r == nil {
			return l.refuse(s, what, "session "+key, wait, early)
		}
		held = r
	}
	if a.b != nil {
		agent := rules.AgentIDFromKey(key)
		if r, wait, early := a.b.take(agent, now); r == nil {
			if held != nil {
				held.CancelAt(now)
			}
			return l.refuse(a, what, "agent "+agent, wait, early)
		}
	}
	return nil
}

// MaxHold is the longest a 429 is held for a caller that came back before
// its wait was over (bus.Error.Hold).
const MaxHold = time.Second

func (l *Limits) refuse(lim *limit, what, who string, wait time.Duration, early bool) *bus.Error {
	l.refused(lim.kind)
	e := bus.TooManyRequests(wait, fmt.Sprintf("too many %s from %s: quotas.%s allows %v a second (burst %d) on this worker",
		what, who, lim.kind, lim.q.Rate, lim.q.Burst))
	if early {
		// it did not wait: its next answer comes when it could have
		// passed (the wait, at most MaxHold), so a loop runs at the pace
		// of its quota instead of the worker's
		e.Hold(min(wait, MaxHold))
	}
	return e
}

// Buckets is how many buckets the limit kind keeps now (0 when unlimited).
func (l *Limits) Buckets(kind string) int {
	if lim := l.limits[kind]; lim != nil && lim.b != nil {
		return lim.b.len()
	}
	return 0
}
