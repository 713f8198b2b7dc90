package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// ErrNotFound means the session has no entry.
var ErrNotFound = errors.New("session not found")

// ErrExists means Create found an entry already there.
var ErrExists = errors.New("session already exists")

// Store is the `sessions` bucket.
type Store struct {
	kv jetstream.KeyValue
}

// Option adjusts the bucket config used when the bucket is first created.
type Option func(*jetstream.KeyValueConfig)

// WithReplicas sets the replica count of a new bucket (3 on a 3-node cluster).
func WithReplicas(n int) Option {
	return func(c *jetstream.KeyValueConfig) {
		if n > 0 {
			c.Replicas = n
		}
	}
}

// OpenStore opens the sessions bucket, creating it if absent. An existing
// bucket keeps its settings, so a client started with defaults can never
// scale a replicated bucket down.
func OpenStore(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Store, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:      names.Bucket("sessions"),
		Description: "sessionbus session entries",
		History:     1,
		Storage:     jetstream.FileStorage,
	}
	for _, o := range opts {
		o(&cfg)
	}
	kv, err := bus.EnsureKV(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv}, nil
}

// KV exposes the bucket (for the index watcher).
func (s *Store) KV() jetstream.KeyValue { return s.kv }

// Get returns the entry and its revision.
func (s *Store) Get(ctx context.Context, key string) (*Entry, uint64, error) {
	ke, err := s.kv.Get(ctx, EncodeKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	e, err := decodeEntry(ke.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("session %s: %w", key, err)
	}
	return e, ke.Revision(), nil
}

// Create writes a new entry; ErrExists if the key is taken.
func (s *Store) Create(ctx context.Context, e *Entry) (uint64, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return 0, err
	}
	rev, err := s.kv.Create(ctx, EncodeKey(e.Key), data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrExists
	}
	return rev, err
}

// Update applies fn to the current entry and writes it back with
// compare-and-set, retrying on a concurrent write, so two workers never lose
// each other's change. fn returning an error aborts without writing.
func (s *Store) Update(ctx context.Context, key string, fn func(*Entry) error) (*Entry, uint64, error) {
	return s.UpdateFrom(ctx, key, nil, 0, fn)
}

// UpdateFrom is Update starting from an entry the caller read at revision
// rev (nil: read it), which saves the read when nobody wrote meanwhile.
// fn gets a copy; cur is left as it was.
func (s *Store) UpdateFrom(ctx context.Context, key string, cur *Entry, rev uint64, fn func(*Entry) error) (*Entry, uint64, error) {
	for attempt := 0; attempt < 32; attempt++ {
		var e *Entry
		if cur != nil {
			c := *cur
			e, cur = &c, nil
		} else {
			var err error
			if e, rev, err = s.Get(ctx, key); err != nil {
				return nil, 0, err
			}
		}
		if err := fn(e); err != nil {
			return nil, 0, err
		}
		data, err := json.Marshal(e)
		if err != nil {
			return nil, 0, err
		}
		nrev, err := s.kv.Update(ctx, EncodeKey(key), data, rev)
		if err == nil {
			return e, nrev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, 0, err
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
	}
	return nil, 0, fmt.Errorf("session %s: too many concurrent updates; retry", key)
}

// Delete removes an entry.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.kv.Delete(ctx, EncodeKey(key))
}

func decodeEntry(data []byte) (*Entry, error) {
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("corrupt session entry: %w", err)
	}
	return &e, nil
}
