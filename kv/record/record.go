// Package record is the one read-modify-write loop of the project: a KV
// bucket of JSON records of one type, read with their revision and written
// back with compare-and-set, retried on a concurrent write. Every stored noun
// whose values change in place (sessions, run records, agent-to-agent state)
// updates through it, so the retry bound and the error texts live once.
package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// MaxAttempts bounds the compare-and-set retries of one Update: past it the
// key is contended by writers that keep winning, and the caller is told so
// rather than spinning.
const MaxAttempts = 32

// ErrUnchanged, returned by an update function, ends Update without writing:
// the record already says what the caller wanted.
var ErrUnchanged = errors.New("record unchanged")

// ErrContended is wrapped by Update when MaxAttempts writes all lost.
var ErrContended = errors.New("too many concurrent updates; retry")

// Bucket holds records of type T. Noun names them in errors ("session",
// "run", ...). The zero Bucket is unusable; build it with New.
type Bucket[T any] struct {
	kv   jetstream.KeyValue
	js   jetstream.JetStream
	noun string
	rep  *replicas                // nil without js: no leader reads
	echo *Echo[T]                 // nil: Decode always decodes
	enc  func(*T) ([]byte, error) // nil: json.Marshal
}

// New wraps kv. js is needed only by UpdateAsync and CreateAsync (they
// publish to the bucket's subjects directly); nil elsewhere is fine.
func New[T any](kv jetstream.KeyValue, js jetstream.JetStream, noun string) Bucket[T] {
	b := Bucket[T]{kv: kv, js: js, noun: noun}
	if js != nil {
		b.rep = &replicas{}
	}
	return b
}

// KV is the underlying bucket.
func (b Bucket[T]) KV() jetstream.KeyValue { return b.kv }

// WithEcho is b whose Decode first takes a value e holds for the bytes
// (Echo), shared by every copy of the result.
func (b Bucket[T]) WithEcho(e *Echo[T]) Bucket[T] {
	b.echo = e
	return b
}

// Get returns the record and its revision. A missing key is
// jetstream.ErrKeyNotFound (wrapped by callers into their own sentinel).
//
// On a replicated bucket a "not found" is confirmed with the stream
// leader (leader.go): a lagging follower must not make an acknowledged
// write look missing.
func (b Bucket[T]) Get(ctx context.Context, key string) (*T, uint64, error) {
	e, err := b.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return b.confirmMissing(ctx, key)
	}
	if err != nil {
		return nil, 0, err
	}
	v, err := b.Decode(e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", b.noun, key, err)
	}
	return v, e.Revision(), nil
}

// GetRequest is the direct get of key's last value that Get sends, for a
// caller that pipelines it with other reads; GetReply decodes its reply.
func (b Bucket[T]) GetRequest(key string) *nats.Msg {
	return &nats.Msg{Subject: jetstream.DefaultAPIPrefix + "DIRECT.GET.KV_" + b.kv.Bucket() + "." + Subject(b.kv, key)}
}

// GetReply is Get's answer from the reply to GetRequest(key): a missing,
// deleted or purged key is jetstream.ErrKeyNotFound, confirmed with the
// stream leader on a replicated bucket as Get does.
func (b Bucket[T]) GetReply(ctx context.Context, key string, m *nats.Msg) (*T, uint64, error) {
	switch st := m.Header.Get("Status"); st {
	case "":
	case "404":
		return b.confirmMissing(ctx, key)
	default:
		return nil, 0, fmt.Errorf("%s %s: direct get: status %s %s", b.noun, key, st, m.Header.Get("Description"))
	}
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return b.confirmMissing(ctx, key)
	}
	rev, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: direct get reply without %s", b.noun, key, jetstream.SequenceHeader)
	}
	v, err := b.Decode(m.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", b.noun, key, err)
	}
	return v, rev, nil
}

// confirmMissing is Get's answer to a direct get that found nothing.
func (b Bucket[T]) confirmMissing(ctx context.Context, key string) (*T, uint64, error) {
	if !b.replicated(ctx) {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	data, rev, found, err := b.leaderGet(ctx, key)
	switch {
	case err != nil:
		return nil, 0, err
	case !found:
		return nil, 0, jetstream.ErrKeyNotFound
	}
	v, err := b.Decode(data)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", b.noun, key, err)
	}
	return v, rev, nil
}

// Decode parses one stored value.
func (b Bucket[T]) Decode(data []byte) (*T, error) {
	if b.echo != nil {
		if v := b.echo.Take(data); v != nil {
			return v, nil
		}
	}
	var v T
	var err error
	// A record that decodes itself is handed the bytes directly:
	// json.Unmarshal would scan them twice more (to validate them, then to
	// find the value's end) before calling it, which at a worker's start on
	// a million sessions is seconds.
	if u, ok := any(&v).(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(data)
	} else {
		err = json.Unmarshal(data, &v)
	}
	if err != nil {
		return nil, fmt.Errorf("corrupt %s record: %w", b.noun, err)
	}
	return &v, nil
}

// Create writes v under key if the key holds nothing; jetstream.ErrKeyExists
// otherwise.
func (b Bucket[T]) Create(ctx context.Context, key string, v *T) (uint64, error) {
	data, err := b.Encode(v)
	if err != nil {
		return 0, err
	}
	return b.kv.Create(ctx, key, data)
}

// Update applies fn to the record and writes it back with compare-and-set,
// retrying on a concurrent write, so two writers never lose each other's
// change. cur and rev are a record the caller already read (nil: read it),
// which saves the read when nobody wrote meanwhile; fn gets a copy and cur
// is left as it was. fn returning ErrUnchanged ends without a write; any other
// error aborts and is returned as is.
func (b Bucket[T]) Update(ctx context.Context, key string, cur *T, rev uint64, fn func(*T) error) (*T, uint64, error) {
	for attempt := range MaxAttempts {
		if cur == nil {
			var err error
			if cur, rev, err = b.Get(ctx, key); err != nil {
				return nil, 0, err
			}
		}
		next := *cur
		if err := fn(&next); err != nil {
			if errors.Is(err, ErrUnchanged) {
				return cur, rev, nil
			}
			return nil, 0, err
		}
		data, err := b.Encode(&next)
		if err != nil {
			return nil, 0, err
		}
		nrev, err := b.kv.Update(ctx, key, data, rev)
		if err == nil {
			return &next, nrev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, 0, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, 0, err
		}
		cur = nil // someone wrote meanwhile: re-read
	}
	return nil, 0, fmt.Errorf("%s %s: %w", b.noun, key, ErrContended)
}

// UpdateAsync is Update whose first write is on the connection when it
// returns, ahead of anything the caller publishes next (the server reads a
// connection in order). wait returns the outcome; a lost compare-and-set
// falls back to Update (read, apply fn again, write).
func (b Bucket[T]) UpdateAsync(ctx context.Context, key string, cur *T, rev uint64, fn func(*T) error) (wait func() (*T, uint64, error), err error) {
	next := *cur
	if err := fn(&next); err != nil {
		return nil, err
	}
	f, err := b.publishAsync(key, &next, rev)
	if err != nil {
		return nil, fmt.Errorf("update %s %s: %w", b.noun, key, err)
	}
	return func() (*T, uint64, error) {
		select {
		case ack := <-f.Ok():
			return &next, ack.Sequence, nil
		case err := <-f.Err():
			if bus.IsWrongLastSeq(err) {
				return b.Update(ctx, key, nil, 0, fn)
			}
			return nil, 0, fmt.Errorf("update %s %s: %w", b.noun, key, err)
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("update %s %s: %w", b.noun, key, ctx.Err())
		}
	}, nil
}

// CreateAsync puts a Create of v on the connection without waiting for its
// acknowledgement; the future says whether the key was free.
func (b Bucket[T]) CreateAsync(key string, v *T) (jetstream.PubAckFuture, error) {
	return b.publishAsync(key, v, 0)
}

// CreateAsyncEchoed is CreateAsync that leaves watched in e for the stored
// bytes (Echo): what this process's watch takes as their decoding when the
// write comes back, v itself or the copy its index keeps.
func (b Bucket[T]) CreateAsyncEchoed(key string, v *T, e *Echo[T], watched *T) (jetstream.PubAckFuture, error) {
	data, err := b.Encode(v)
	if err != nil {
		return nil, err
	}
	e.Put(data, watched)
	return b.publishDataAsync(key, data, 0)
}

// Encode is the stored form of v, as every write of the bucket encodes it:
// the bucket's encoder (WithEncoder), else json.Marshal.
func (b Bucket[T]) Encode(v *T) ([]byte, error) {
	if b.enc != nil {
		return b.enc(v)
	}
	return json.Marshal(v)
}

// WithEncoder is b encoding its records with enc, which must write what
// json.Marshal writes (compact, HTML-escaped JSON): for a type whose
// MarshalJSON json.Marshal would run and then compact again, a second
// pass over every byte.
func (b Bucket[T]) WithEncoder(enc func(*T) ([]byte, error)) Bucket[T] {
	b.enc = enc
	return b
}

// publishAsync writes v to the key's subject expecting the key's last
// revision to be rev (0: no value yet). This is the KV Update/Create wire
// form, which the KV API offers only synchronously.
func (b Bucket[T]) publishAsync(key string, v *T, rev uint64) (jetstream.PubAckFuture, error) {
	data, err := b.Encode(v)
	if err != nil {
		return nil, err
	}
	return b.publishDataAsync(key, data, rev)
}

func (b Bucket[T]) publishDataAsync(key string, data []byte, rev uint64) (jetstream.PubAckFuture, error) {
	m := nats.NewMsg(Subject(b.kv, key))
	m.Data = data
	return b.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(rev))
}

// Subject is the subject a bucket stores key under.
func Subject(kv jetstream.KeyValue, key string) string {
	return "$KV." + kv.Bucket() + "." + key
}

// backoff waits a random time that grows with the attempts lost, so writers
// racing for one hot key spread out instead of colliding again in lockstep
// (without it, eight writers on one key exhausted MaxAttempts in tests).
func backoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return ctx.Err() // the first retry is immediate: most races are one write
	}
	return bus.Sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt, 10))*int64(200*time.Microsecond))))
}
