// Package sessions is the `sessions` bucket: one entry per session key (the
// entry type, its JSON encoding, compare-and-set updates) and the watched
// in-memory index that workers list and resolve from.
package sessions

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// ErrNotFound means the session has no entry.
var ErrNotFound = errors.New("session not found")

// ErrExists means Create found an entry already there.
var ErrExists = errors.New("session already exists")

// Store is the `sessions` bucket.
type Store struct {
	bus.KVConfig // recreated by bus.Guard (a gateway's) or the index (a worker's)
	b            record.Bucket[Entry]
	js           jetstream.JetStream
	// echo holds the entries CreateAsync wrote, for this process's index
	echo *record.Echo[Entry]
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// Open opens the sessions bucket, creating it if absent. An existing
// bucket keeps its settings, so a client started with defaults can never
// scale a replicated bucket down.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Store, error) {
	kv, opened, err := bus.OpenBucket(ctx, js, bus.Bucket{Name: names.SessionsBucket(), Description: "sessionbus session entries"}, opts...)
	if err != nil {
		return nil, err
	}
	echo := record.NewEcho[Entry](record.EchoSize)
	return &Store{KVConfig: opened, b: record.New[Entry](kv, js, "session").WithEcho(echo).WithEncoder((*Entry).encode), echo: echo, js: js}, nil
}

// decodeWatched is the entry the watch brought as data: the one this
// process wrote, if the echo holds it, else data decoded with the strings
// in holds.
func (s *Store) decodeWatched(data []byte, in *interner) (*Entry, error) {
	if e := s.echo.Take(data); e != nil {
		return e, nil
	}
	return decodeInterned(data, in)
}

// recreate creates the bucket again, as Open did, after it was deleted.
func (s *Store) recreate(ctx context.Context) error { return s.KVConfig.Recreate(ctx, "") }

// KV exposes the bucket (for the index watcher).
func (s *Store) KV() jetstream.KeyValue { return s.b.KV() }

// Get returns the entry and its revision.
func (s *Store) Get(ctx context.Context, key string) (*Entry, uint64, error) {
	e, rev, err := s.b.Get(ctx, bus.EncodeKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	return e, rev, err
}

// Create writes a new entry; ErrExists if the key is taken.
func (s *Store) Create(ctx context.Context, e *Entry) (uint64, error) {
	rev, err := s.b.Create(ctx, bus.EncodeKey(e.Key), e)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrExists
	}
	return rev, err
}

// CreateAsync puts the Create of e on the connection without waiting for
// its acknowledgement (a spawn pipelines it behind its registry record);
// the future's error is jetstream.ErrKeyExists-like (bus.IsWrongLastSeq)
// when the key is taken.
//
// e passes to the store: this process's index (Index) takes it as the
// decoded entry when its watch brings the write back (record.Echo), so the
// caller must not use it afterwards.
func (s *Store) CreateAsync(e *Entry) (jetstream.PubAckFuture, error) {
	return s.b.CreateAsyncEchoed(bus.EncodeKey(e.Key), e, s.echo, e)
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
	e, nrev, err := s.b.Update(ctx, bus.EncodeKey(key), cur, rev, fn)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if errors.Is(err, record.ErrContended) {
		return nil, 0, fmt.Errorf("session %s: %w", key, record.ErrContended)
	}
	return e, nrev, err
}

// Delete removes an entry.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.b.KV().Delete(ctx, bus.EncodeKey(key))
}
