// Package threadbindings is the `threadbindings` bucket: which session a
// channel conversation is bound to. A sub-agent spawned with thread=true
// binds the requester's conversation (the thread it is in, else the chat),
// and while the binding lives the ingress routes the humans' messages there
// to the child instead of the key OpenClaw's rules give. One record per
// conversation, keyed by (channel, account, to, thread), so any worker
// finds it with one get.
package threadbindings

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// Conversation names a chat, or a thread in it, on a channel account. Its
// fields are compared as given: callers normalize the channel and account
// (as the ingress does) before building one.
type Conversation struct {
	Channel   string `json:"channel"`
	AccountID string `json:"accountId"`
	To        string `json:"to"`
	ThreadID  string `json:"threadId,omitempty"`
}

// Key is the conversation's bucket key: the channel and account readable
// (so `nats kv ls` groups them), then a digest of the chat and thread ids,
// which may be long or hold any character.
func (c Conversation) Key() string {
	sum := sha256.Sum256([]byte(c.To + "\x00" + c.ThreadID))
	return bus.EncodeKey(c.Channel) + "." + bus.EncodeKey(c.AccountID) + "." + hex.EncodeToString(sum[:16])
}

// Binding is one bound conversation.
type Binding struct {
	Conversation
	// TargetSessionKey is the session the conversation's messages go to.
	TargetSessionKey string `json:"targetSessionKey"`
	TargetKind       string `json:"targetKind"` // subagent
	// RequesterSessionKey spawned the target; RunID is the spawn's run,
	// which tells a retried spawn's binding from another's.
	RequesterSessionKey string `json:"requesterSessionKey,omitempty"`
	RunID               string `json:"runId,omitempty"`
	Mode                string `json:"mode,omitempty"` // run | session
	AgentID             string `json:"agentId,omitempty"`
	Label               string `json:"label,omitempty"`
	BoundAt             int64  `json:"boundAt"`
	// LastActivityAt is the last human message routed through the
	// binding (ms), the idle clock.
	LastActivityAt int64 `json:"lastActivityAt,omitempty"`
	// IdleTimeoutMs and MaxAgeMs end the binding (0: never), as
	// threadBindings.idleHours and maxAgeHours were when it was made.
	IdleTimeoutMs int64 `json:"idleTimeoutMs,omitempty"`
	MaxAgeMs      int64 `json:"maxAgeMs,omitempty"`
}

// ExpiresAt is when the binding ends by its timeouts (ms), 0 for never:
// the earlier of its idle and its max-age expiry.
func (b *Binding) ExpiresAt() int64 {
	var at int64
	if b.IdleTimeoutMs > 0 {
		at = max(b.LastActivityAt, b.BoundAt) + b.IdleTimeoutMs
	}
	if b.MaxAgeMs > 0 {
		if m := b.BoundAt + b.MaxAgeMs; at == 0 || m < at {
			at = m
		}
	}
	return at
}

// Expired reports a binding past its expiry at now (ms).
func (b *Binding) Expired(now int64) bool {
	at := b.ExpiresAt()
	return at > 0 && now >= at
}

// ErrNotFound is returned for a conversation with no binding.
var ErrNotFound = errors.New("conversation not bound")

// ErrBound is returned by Bind when the conversation is bound to another
// session.
var ErrBound = errors.New("conversation already bound to another session")

// Store is the threadbindings bucket.
type Store struct {
	bus.KVConfig // recreated by bus.Guard
	b            record.Bucket[Binding]
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// Open creates the bucket if absent; an existing bucket keeps its settings.
// Bindings carry their own expiry, so the bucket has no TTL.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Store, error) {
	kv, opened, err := bus.OpenBucket(ctx, js, bus.Bucket{
		Name:        names.ThreadBindingsBucket(),
		Description: "sessionbus thread bindings: conversation -> bound sub-agent session",
	}, opts...)
	if err != nil {
		return nil, err
	}
	return &Store{KVConfig: opened, b: record.New[Binding](kv, js, "thread binding")}, nil
}

// KV is the underlying bucket.
func (s *Store) KV() jetstream.KeyValue { return s.b.KV() }

// Get returns the binding of c; ErrNotFound when it has none.
func (s *Store) Get(ctx context.Context, c Conversation) (*Binding, uint64, error) {
	b, rev, err := s.b.Get(ctx, c.Key())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the thread binding of %s: %w", c.Channel, err)
	}
	return b, rev, nil
}

// CreateAsync puts the create of b on the connection without waiting: the
// future fails with a wrong-last-sequence error when the conversation is
// bound already (Settle tells a retry's own binding from another's).
func (s *Store) CreateAsync(b *Binding) (jetstream.PubAckFuture, error) {
	f, err := s.b.CreateAsync(b.Key(), b)
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", b.TargetSessionKey, err)
	}
	return f, nil
}

// Bind binds b's conversation to its target: a create, so of two spawns
// binding one conversation at once exactly one wins. A binding already
// there for the same target and run is this spawn's own (a retry) and is
// no error; one for another session is ErrBound, unless replace says it
// may go (ended or expired), in which case it is replaced by compare-and-set.
func (s *Store) Bind(ctx context.Context, b *Binding, replace func(old *Binding) bool) error {
	for range record.MaxAttempts {
		_, err := s.b.Create(ctx, b.Key(), b)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("bind %s: %w", b.TargetSessionKey, err)
		}
		old, rev, gerr := s.Get(ctx, b.Conversation)
		if errors.Is(gerr, ErrNotFound) {
			continue // unbound meanwhile
		}
		if gerr != nil {
			return gerr
		}
		if Same(old, b) {
			return nil
		}
		if replace == nil || !replace(old) {
			return ErrBound
		}
		if _, err := s.b.KV().Update(ctx, b.Key(), mustEncode(s.b, b), rev); err == nil {
			return nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("bind %s: %w", b.TargetSessionKey, err)
		}
	}
	return fmt.Errorf("bind %s: %w", b.TargetSessionKey, record.ErrContended)
}

// Same reports two bindings of one spawn: same target and run.
func Same(a, b *Binding) bool {
	return a.TargetSessionKey == b.TargetSessionKey && a.RunID == b.RunID
}

func mustEncode(b record.Bucket[Binding], v *Binding) []byte {
	data, err := b.Encode(v)
	if err != nil {
		panic("thread binding does not encode: " + err.Error()) // plain strings and ints
	}
	return data
}

// Unbind removes the binding of c if it still binds target (another
// session's, made since, stays), and, when runID is not empty, was made by
// the spawn of that run; no binding is no error.
func (s *Store) Unbind(ctx context.Context, c Conversation, target, runID string) error {
	b, rev, err := s.Get(ctx, c)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if runID != "" && b.RunID != runID {
		return nil
	}
	return s.Remove(ctx, b, rev, target)
}

// Remove deletes b (read at rev) if it binds target, by compare-and-set: a
// binding rewritten meanwhile is left to its new writer.
func (s *Store) Remove(ctx context.Context, b *Binding, rev uint64, target string) error {
	if b.TargetSessionKey != target {
		return nil
	}
	err := s.b.KV().Delete(ctx, b.Key(), jetstream.LastRevision(rev))
	if err != nil && !bus.IsWrongLastSeq(err) && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("unbind %s: %w", target, err)
	}
	return nil
}

// Touch moves the binding's idle clock to now (ms), by compare-and-set
// from rev; a binding changed meanwhile is left as it is (the idle clock
// is coarse: hours).
func (s *Store) Touch(ctx context.Context, b *Binding, rev uint64, now int64) error {
	next := *b
	next.LastActivityAt = now
	_, err := s.b.KV().Update(ctx, b.Key(), mustEncode(s.b, &next), rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return err
}
