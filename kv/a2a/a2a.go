// Package a2a is the `a2a` bucket: the progress of one agent-to-agent flow
// (the ping-pong turns and the announce step after a sessions_send), keyed
// by the primary run's id, so any gateway can move a flow on after a crash.
package a2a

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// State is a flow's progress.
type State struct {
	TargetKey     string `json:"targetKey"`
	TargetAgent   string `json:"targetAgent"`
	TargetChannel string `json:"targetChannel"`
	RoundOneReply string `json:"roundOneReply"`
	LatestReply   string `json:"latestReply"`
	Turn          int    `json:"turn"`         // last completed ping-pong turn
	PingPongDone  bool   `json:"pingPongDone"` // stopped early (REPLY_SKIP, empty, failure)
	Done          bool   `json:"done"`
	Delivered     bool   `json:"delivered,omitempty"`
}

// Store is the a2a bucket.
type Store struct {
	bus.KVConfig // recreated by bus.Guard
	b            record.Bucket[State]
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// WithMaxAge sets how long a flow's state outlives its last write, the
// bucket's TTL (bus.runRecordMaxAge, like the run records it belongs to;
// default 0: no TTL).
var WithMaxAge = bus.WithMaxAge

// Open creates the bucket if absent; an existing bucket keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Store, error) {
	kv, opened, err := bus.OpenBucket(ctx, js, bus.Bucket{
		Name:        names.A2ABucket(),
		Description: "sessionbus agent-to-agent flows: progress per primary run",
		Ages:        true, // no limit unless WithMaxAge
	}, opts...)
	if err != nil {
		return nil, err
	}
	return &Store{KVConfig: opened, b: record.New[State](kv, js, "a2a flow")}, nil
}

// Start records a flow's first state unless the flow has one (a
// redelivered run starting it again), and returns what is stored.
func (s *Store) Start(ctx context.Context, primary string, st *State) (*State, error) {
	if _, err := s.b.Create(ctx, primary, st); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, err
	}
	cur, _, err := s.b.Get(ctx, primary)
	return cur, err
}

// Get returns the flow's state.
func (s *Store) Get(ctx context.Context, primary string) (*State, error) {
	st, _, err := s.b.Get(ctx, primary)
	return st, err
}

// Update applies fn with compare-and-set; fn returning false writes nothing.
func (s *Store) Update(ctx context.Context, primary string, fn func(*State) bool) (*State, error) {
	st, _, err := s.b.Update(ctx, primary, nil, 0, func(st *State) error {
		if !fn(st) {
			return record.ErrUnchanged
		}
		return nil
	})
	return st, err
}
