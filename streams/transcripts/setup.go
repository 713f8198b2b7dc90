package transcripts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Option configures Open.
type Option func(*options)

type options struct {
	replicas      int
	maxEntryBytes int
	timeout       time.Duration
}

func defaultOptions() options {
	return options{replicas: 1, maxEntryBytes: DefaultMaxEntryBytes, timeout: 5 * time.Second}
}

// DefaultMaxEntryBytes bounds one transcript entry (the message body).
const DefaultMaxEntryBytes = 1 << 20

// WithReplicas sets the replica count used when the stream and bucket are
// created (R3 on a 3-node cluster). Existing objects keep theirs.
func WithReplicas(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.replicas = n
		}
	}
}

// WithMaxEntryBytes changes the largest entry Append accepts.
func WithMaxEntryBytes(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxEntryBytes = n
		}
	}
}

// WithTimeout is the deadline applied to an operation whose context has none.
func WithTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// TranscriptDedupeWindow is how long SB_TRANSCRIPTS remembers the message
// ids of run appends (the server's default, stated so the config says it).
const TranscriptDedupeWindow = 2 * time.Minute

// TranscriptStreamConfig is the configuration Open creates
// SB_TRANSCRIPTS with.
func TranscriptStreamConfig(names bus.Names, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               names.TranscriptsStream(),
		Description:        "sessionbus transcripts: one message per entry on " + names.Transcript("<key>"),
		Subjects:           []string{names.Transcript(">")},
		Retention:          jetstream.LimitsPolicy,
		Storage:            jetstream.FileStorage,
		Discard:            jetstream.DiscardOld,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxMsgsPerSubject:  -1,
		MaxAge:             0,
		Replicas:           max(replicas, 1),
		AllowDirect:        true,
		AllowAtomicPublish: true,
		// Run appends carry a message id (run id + part), so an append
		// repeated by a redelivered run inside this window is dropped by the
		// server itself (the run record's transcript position covers later).
		Duplicates: TranscriptDedupeWindow,
	}
}

// ensureTranscriptStream creates the stream if absent. An existing stream keeps
// its settings (an operator may have set limits), except the three this code
// depends on: our subjects, AllowDirect and AllowAtomicPublish.
func ensureTranscriptStream(ctx context.Context, js jetstream.JetStream, names bus.Names, replicas int) (jetstream.Stream, error) {
	want := TranscriptStreamConfig(names, replicas)
	for attempt := 0; ; attempt++ {
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && attempt == 0 {
				continue // created concurrently: re-read and check it
			}
			if err != nil {
				return nil, fmt.Errorf("create stream %s: %w", want.Name, err)
			}
			return s, nil
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", want.Name, err)
		}
		cfg := s.CachedInfo().Config
		if cfg.AllowDirect && cfg.AllowAtomicPublish && slices.Contains(cfg.Subjects, want.Subjects[0]) {
			return s, nil
		}
		cfg.AllowDirect, cfg.AllowAtomicPublish = true, true
		if !slices.Contains(cfg.Subjects, want.Subjects[0]) {
			cfg.Subjects = append(cfg.Subjects, want.Subjects[0])
		}
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("update stream %s (needs allow_direct, allow_atomic and subject %s): %w", want.Name, want.Subjects[0], err)
		}
		// Re-fetch so the handle's cached info says AllowDirect.
		return js.Stream(ctx, want.Name)
	}
}

// ensureIndexBucket creates the trindex KV bucket (history 1, file) if absent.
func ensureIndexBucket(ctx context.Context, js jetstream.JetStream, names bus.Names, replicas int) (jetstream.KeyValue, jetstream.Stream, error) {
	bucket := names.TranscriptIndexBucket()
	kv, _, err := bus.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "sessionbus transcript index: h.<key> head, c.<key>.<chunk> sealed chunks of 64 stream sequences",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, nil, err
	}
	st, err := js.Stream(ctx, bus.KVStream(bucket))
	if err != nil {
		return nil, nil, fmt.Errorf("kv bucket %s stream: %w", bucket, err)
	}
	if !st.CachedInfo().Config.AllowDirect {
		return nil, nil, fmt.Errorf("kv bucket %s has allow_direct off; transcript reads need direct get", bucket)
	}
	return kv, st, nil
}

// Streams are SB_TRANSCRIPTS and the index bucket's stream (see bus.Guard).
func (t *Store) Streams() []string {
	return []string{t.names.TranscriptsStream(), bus.KVStream(t.names.TranscriptIndexBucket())}
}

// Recreate creates a deleted stream again (see bus.Guard). When the
// transcript stream went, the index goes too: it maps entries to sequences
// of a stream that no longer exists, and the new stream numbers from 1, so
// keeping it would serve other sessions' messages.
func (t *Store) Recreate(ctx context.Context, deleted string) error {
	if deleted == t.names.TranscriptsStream() {
		t.gen.Add(1) // its sequences start again: they name other messages now
		if _, err := ensureTranscriptStream(ctx, t.js, t.names, t.opts.replicas); err != nil {
			return err
		}
		if err := t.kvStream.Purge(ctx); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("purge the transcript index after its stream was deleted: %w", err)
		}
		return nil
	}
	_, _, err := ensureIndexBucket(ctx, t.js, t.names, t.opts.replicas)
	return err
}
