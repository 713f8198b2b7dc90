package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ensureKV opens a bucket, creating it with cfg if absent. An existing
// bucket keeps its settings, so a client started with defaults can never
// scale a replicated bucket down.
func ensureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open bucket %s: %w", cfg.Bucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// ensureStream opens a stream, creating it with cfg if absent; an existing
// stream keeps its settings.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("open stream %s: %w", cfg.Name, err)
	}
	s, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		s, err = js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// IsWrongLastSeq reports a compare-and-set failure on an expected
// last-subject-sequence header (10071; replicated streams may answer 10164).
func IsWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// IsMsgIDInProcess reports a publish refused because a message with the
// same Nats-Msg-Id is being stored right now (409, JetStream error 10158,
// seen on a replicated stream around a leader change): trying again soon
// gets the first one's acknowledgement as a duplicate.
func IsMsgIDInProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == msgIDInProcess
}

// msgIDInProcess is nats-server's JSStreamDuplicateMessageConflict.
const msgIDInProcess jetstream.ErrorCode = 10158

// KVConfig is a bucket as it was opened, embedded by the stores whose
// bucket a Guard brings back after an operator deleted it: it recreates
// the bucket with the config it was opened with.
type KVConfig struct {
	js  jetstream.JetStream
	cfg jetstream.KeyValueConfig
}

// OpenKV opens the bucket cfg names, creating it with cfg if absent. An
// existing bucket keeps its settings, so a client started with defaults can
// never scale a replicated bucket down. The KVConfig it returns creates the
// bucket again (Recreate), as this call would have.
func OpenKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, KVConfig, error) {
	kv, err := ensureKV(ctx, js, cfg)
	return kv, KVConfig{js: js, cfg: cfg}, err
}

// Streams is the bucket's stream (see Guard).
func (k KVConfig) Streams() []string { return []string{KVStream(k.cfg.Bucket)} }

// Recreate creates the bucket again (see Guard).
func (k KVConfig) Recreate(ctx context.Context, _ string) error {
	_, err := ensureKV(ctx, k.js, k.cfg)
	return err
}

// StreamConfig is a stream as it was opened, the KVConfig of streams.
type StreamConfig struct {
	js  jetstream.JetStream
	cfg jetstream.StreamConfig
}

// OpenStream opens the stream cfg names, creating it with cfg if absent;
// an existing stream keeps its settings. The StreamConfig it returns
// creates the stream again (Recreate), as this call would have.
func OpenStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, StreamConfig, error) {
	st, err := ensureStream(ctx, js, cfg)
	return st, StreamConfig{js: js, cfg: cfg}, err
}

// Streams is the stream (see Guard).
func (s StreamConfig) Streams() []string { return []string{s.cfg.Name} }

// Recreate creates the stream again (see Guard).
func (s StreamConfig) Recreate(ctx context.Context, _ string) error {
	_, err := ensureStream(ctx, s.js, s.cfg)
	return err
}
