// Package subagents is the `subagents` bucket: the child registry. One
// record per spawned sub-agent session, keyed by the child's session key:
// who spawned it and who controls it, its current run, its outcome, and
// whether its completion announce reached the requester. A steer replaces
// the record's run (the latest run of a child wins, as in OpenClaw).
//
// The record is also the commit point of a spawn: it is written first and
// carries the child's first run request, so any gateway that finds a
// record whose run was never queued queues it again (idempotently, the run
// id is fixed), and a crash between the steps of a spawn leaves no child
// without a run (see docs/subagents.md).
package subagents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/runreq"
	"github.com/sessionbus/sessionbus/kv/record"
)

// Outcomes of a child's run, as the run records name them (runs.OK, ...);
// empty while the run is active.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeTimeout = "timeout"
	OutcomeKilled  = "killed"
)

// Announce delivery states.
const (
	AnnouncePending   = "pending"   // the child ended; not yet in the requester's session
	AnnounceQueued    = "queued"    // a gateway claimed it and queued the requester's run
	AnnounceDelivered = "delivered" // the requester's run carrying it recorded its prompt
	AnnounceSkipped   = "skipped"   // ANNOUNCE_SKIP / NO_REPLY: nothing to post
	AnnounceFailed    = "failed"    // gave up after retries; Error says why
)

// Origin is the requester's channel route when it spawned the child.
type Origin struct {
	Channel   string `json:"channel,omitempty"`
	To        string `json:"to,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	ThreadID  string `json:"threadId,omitempty"`
}

// Announce is the delivery state of the child's completion announce.
type Announce struct {
	State       string `json:"state"`
	Attempts    int    `json:"attempts,omitempty"`
	Error       string `json:"error,omitempty"`
	Gateway     string `json:"gateway,omitempty"`     // the gateway that claimed it
	TargetKey   string `json:"targetKey,omitempty"`   // the session it went to (the requester, or a fallback)
	DeliveryRun string `json:"deliveryRun,omitempty"` // the run that carries it into TargetKey
	// Carrier numbers the run that carries it: a carrying run that ended
	// without its prompt in the requester's transcript (it failed before it
	// started) is never run again, so the
	// next attempt queues a run of the next number
	Carrier int   `json:"carrier,omitempty"`
	At      int64 `json:"at,omitempty"` // last state change, ms
}

// Record is one child in the registry (key: the child's session key).
type Record struct {
	RunID                string  `json:"runId"`
	ChildSessionKey      string  `json:"childSessionKey"`
	ChildSessionID       string  `json:"childSessionId,omitempty"`
	ChildAgentID         string  `json:"childAgentId"`
	ControllerSessionKey string  `json:"controllerSessionKey"`
	RequesterSessionKey  string  `json:"requesterSessionKey"`
	RequesterDisplayKey  string  `json:"requesterDisplayKey,omitempty"`
	RequesterOrigin      *Origin `json:"requesterOrigin,omitempty"`
	Task                 string  `json:"task"`
	Label                string  `json:"label,omitempty"`
	Cleanup              string  `json:"cleanup"` // delete | keep
	SpawnMode            string  `json:"spawnMode"`
	Runtime              string  `json:"runtime"` // subagent | acp
	Model                string  `json:"model,omitempty"`
	Thinking             string  `json:"thinking,omitempty"`
	Depth                int     `json:"depth"`
	RunTimeoutSeconds    int     `json:"runTimeoutSeconds,omitempty"`
	IdempotencyKey       string  `json:"idempotencyKey,omitempty"`
	ExpectsCompletion    bool    `json:"expectsCompletionMessage"`

	CreatedAt int64 `json:"createdAt"`
	StartedAt int64 `json:"startedAt,omitempty"`
	// DeadlineAt is when the current run times out (ms; 0: none), set when
	// it first starts: any gateway's sweep ends a run past it as timeout,
	// even one whose gateway died.
	DeadlineAt int64  `json:"deadlineAt,omitempty"`
	EndedAt    int64  `json:"endedAt,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	Error      string `json:"error,omitempty"`

	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
	TotalTokens  int64 `json:"totalTokens,omitempty"`

	// Request is the current run's request, kept so a run that was never
	// queued (a crash right after this record was written) is queued again
	// by whichever gateway sweeps first.
	Request *runreq.Request `json:"request,omitempty"`
	// Queued is set once the run request is known to be in SB_RUNS.
	Queued bool `json:"queued,omitempty"`

	Announce *Announce `json:"announce,omitempty"`
	// Deleted is set by cleanup "delete" once the child's session is gone.
	Deleted bool `json:"deleted,omitempty"`

	// SubagentRole (orchestrator | leaf) and SubagentControlScope
	// (children | none) are what the child's session entry stores, kept
	// here so a half-done spawn's entry can be written from the record.
	SubagentRole         string `json:"subagentRole,omitempty"`
	SubagentControlScope string `json:"subagentControlScope,omitempty"`
	// SpawnContext is fork or isolated (the child's transcript started
	// with a copy of the requester's, or empty).
	SpawnContext string `json:"spawnContext,omitempty"`
	// Thread is a thread-bound spawn: the child keeps the requester's route,
	// and the requester's conversation (RequesterOrigin) is bound to it.
	Thread bool `json:"thread,omitempty"`
	// ThreadIdleTimeoutMs and ThreadMaxAgeMs are the binding's expiry (0:
	// never), from threadBindings when the child was spawned.
	ThreadIdleTimeoutMs int64 `json:"threadIdleTimeoutMs,omitempty"`
	ThreadMaxAgeMs      int64 `json:"threadMaxAgeMs,omitempty"`
}

// Active reports a run not yet ended.
func (r *Record) Active() bool { return r.EndedAt == 0 }

// ErrNotFound is returned for a child with no record.
var ErrNotFound = errors.New("no such sub-agent")

// ErrExists is returned by Create when the child already has a record.
var ErrExists = errors.New("sub-agent already registered")

// Registry is the subagents bucket.
type Registry struct {
	bus.KVConfig // recreated by bus.Guard
	b            record.Bucket[Record]
	js           jetstream.JetStream
	// echo holds the records CreateAsync wrote, for the index (they carry
	// no run request, so Get never takes them)
	echo *record.Echo[Record]
}

// DefaultMaxAge is how long a record outlives its last write: the
// `subagents list` window is at most a day (recentMinutes clamps to 1440),
// and a week keeps a lost announce visible long after.
const DefaultMaxAge = 7 * 24 * time.Hour

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// WithMaxAge sets how long a record outlives its last write, the bucket's
// TTL (0 or unset: DefaultMaxAge).
var WithMaxAge = bus.WithMaxAge

// Open creates the bucket if absent; an existing bucket keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Registry, error) {
	kv, opened, err := bus.OpenBucket(ctx, js, bus.Bucket{
		Name:        names.SubagentsBucket(),
		Description: "sessionbus child registry: one record per spawned sub-agent",
		Ages:        true, Age: DefaultMaxAge,
	}, opts...)
	if err != nil {
		return nil, err
	}
	return &Registry{KVConfig: opened, b: record.New[Record](kv, js, "sub-agent"), js: js, echo: record.NewEcho[Record](record.EchoSize)}, nil
}

// KV is the underlying bucket.
func (r *Registry) KV() jetstream.KeyValue { return r.b.KV() }

// Create registers a child; ErrExists when its key is taken.
func (r *Registry) Create(ctx context.Context, rec *Record) (uint64, error) {
	rev, err := r.b.Create(ctx, bus.EncodeKey(rec.ChildSessionKey), rec)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrExists
	}
	if err != nil {
		return 0, fmt.Errorf("register sub-agent %s: %w", rec.ChildSessionKey, err)
	}
	return rev, nil
}

// CreateAsync is Create without waiting for the ack. The record, without
// its run request, is left for this process's index (record.Echo), whose
// watch then applies it when the write comes back instead of decoding it
// again.
func (r *Registry) CreateAsync(rec *Record) (jetstream.PubAckFuture, error) {
	c := *rec
	c.Request = nil // as decodeIndexed leaves it
	f, err := r.b.CreateAsyncEchoed(bus.EncodeKey(rec.ChildSessionKey), rec, r.echo, &c)
	if err != nil {
		return nil, fmt.Errorf("register sub-agent %s: %w", rec.ChildSessionKey, err)
	}
	return f, nil
}

// Get returns a child's record; ErrNotFound when it has none.
func (r *Registry) Get(ctx context.Context, childKey string) (*Record, uint64, error) {
	rec, rev, err := r.b.Get(ctx, bus.EncodeKey(childKey))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	return rec, rev, err
}

// Update applies fn with compare-and-set (record.ErrUnchanged from fn
// writes nothing).
func (r *Registry) Update(ctx context.Context, childKey string, fn func(*Record) error) (*Record, error) {
	rec, _, err := r.b.Update(ctx, bus.EncodeKey(childKey), nil, 0, fn)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	return rec, err
}

// Delete removes a child's record.
func (r *Registry) Delete(ctx context.Context, childKey string) error {
	return r.b.KV().Delete(ctx, bus.EncodeKey(childKey))
}
