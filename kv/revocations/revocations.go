// Package revocations is the `revocations` bucket: one key per run whose
// caller tokens are no longer valid (the run ended or was killed), written
// by the gateway that ran it or the worker that killed it, and watched into
// memory by every worker so a token check costs no round trip. An entry
// lives as long as the longest token (bus.MaxTokenTTL) plus clock skew:
// after that every token it revokes has expired anyway.
package revocations

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// MaxAge is how long a revocation is kept.
const MaxAge = bus.MaxTokenTTL + 10*time.Minute

// Bucket is the bucket's name for names (`revocations` with the default prefix).
func Bucket(names bus.Names) string { return names.Bucket("revocations") }

// Entry is the value of a revocation key.
type Entry struct {
	// At is when the run's tokens stopped being valid, in microseconds:
	// tokens minted up to it are refused, a retry's newer ones pass.
	At     int64  `json:"at"`
	Reason string `json:"reason"`
}

// The reasons a run's tokens are revoked.
const (
	ReasonEnded  = "ended"
	ReasonKilled = "killed"
)

// Store writes revocations and, once Watch runs, answers RevokedAt from
// memory.
type Store struct {
	bus.KVConfig // recreated by bus.Guard
	kv           jetstream.KeyValue
	log          *slog.Logger

	mu      sync.RWMutex
	revoked map[string]time.Time
	stop    func()
	done    chan struct{}
}

// Option configures Open.
type Option func(*options)

type options struct {
	replicas int
	log      *slog.Logger
}

// WithReplicas sets the replica count of a new bucket (default 1).
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// WithLogger sets where the watch logs what it cannot read (default:
// nowhere).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Open creates the bucket if absent; an existing bucket keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	kv, opened, err := bus.OpenBucket(ctx, js, bus.Bucket{
		Name:        Bucket(names),
		Description: "sessionbus revoked run tokens (a run's tokens end with the run)",
		Ages:        true, Age: MaxAge,
	}, bus.WithReplicas(o.replicas))
	if err != nil {
		return nil, fmt.Errorf("revocations bucket: %w", err)
	}
	return &Store{KVConfig: opened, kv: kv, log: o.log, revoked: map[string]time.Time{}}, nil
}

// runIDRe is what a run id may be to be a key: the ids sessionbus makes
// (uuids, with suffixes such as .announce) always are.
var runIDRe = regexp.MustCompile(`^[-_=a-zA-Z0-9]+(\.[-_=a-zA-Z0-9]+)*$`)

// Revoke ends the validity of every token of runID minted up to now.
func (s *Store) Revoke(ctx context.Context, runID, reason string) error {
	if !runIDRe.MatchString(runID) {
		return fmt.Errorf("run id %q cannot be a revocation key", runID)
	}
	data, _ := json.Marshal(Entry{At: time.Now().UnixMicro(), Reason: reason})
	if _, err := s.kv.Put(ctx, runID, data); err != nil {
		return fmt.Errorf("revoke run %s: %w", runID, err)
	}
	return nil
}

// Watch loads every revocation and keeps the in-memory set current until
// Stop. It returns once the initial values are in.
func (s *Store) Watch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.Background())
	w, err := s.kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return fmt.Errorf("watch revocations: %w", err)
	}
	s.stop, s.done = cancel, make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(s.done)
		record.Follow(wctx, w, ready, s.apply)
	}()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		s.Stop()
		return fmt.Errorf("watch revocations: %w", ctx.Err())
	}
}

func (s *Store) apply(e jetstream.KeyValueEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		// an aged-out entry: every token it revoked has expired
		delete(s.revoked, e.Key())
		return
	}
	var v Entry
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		s.log.Warn("ignoring a revocation that is not JSON", "run", e.Key(), "err", err)
		return
	}
	s.revoked[e.Key()] = time.UnixMicro(v.At)
}

// RevokedAt is when runID's tokens were revoked (bus.Revocations).
func (s *Store) RevokedAt(runID string) (time.Time, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	at, ok := s.revoked[runID]
	return at, ok
}

// Stop ends the watch (a Store that never watched stops at once).
func (s *Store) Stop() {
	if s.stop == nil {
		return
	}
	s.stop()
	<-s.done
}
