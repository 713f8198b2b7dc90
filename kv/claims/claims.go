// Package claims is the `claims` bucket: exactly-once delivery claims. Every
// gateway receives each announce and notice; the one whose create of the
// event's claim key succeeds delivers it. A claim is a lease (a per-key TTL
// the server enforces): should its holder die before finishing, the claim
// expires and the next sweep by any gateway takes it again. A finished
// claim is rewritten without TTL and stays, so nobody delivers twice,
// until the bucket's max age.
package claims

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// MaxAge is how long a finished claim is kept: longer than SB_EVENTS keeps
// the event it claims, so a replayed event finds it.
const MaxAge = 8 * 24 * time.Hour

// Claim is the value of a claim key.
type Claim struct {
	Holder string `json:"holder"`
	At     int64  `json:"at"`
	Done   bool   `json:"done,omitempty"`
}

// Claims is the bucket.
type Claims struct {
	bus.KVConfig // recreated by bus.Guard
	kv           jetstream.KeyValue
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// Open creates the bucket if absent (per-key TTLs need nats-server 2.11);
// an existing bucket keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Claims, error) {
	kv, opened, err := bus.OpenBucket(ctx, js, bus.Bucket{
		Name:        names.ClaimsBucket(),
		Description: "sessionbus exactly-once delivery claims (leases expire by server TTL)",
		Ages:        true, Age: MaxAge,
		LimitMarkerTTL: time.Minute,
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("claims bucket (needs nats-server 2.11 or later): %w", err)
	}
	return &Claims{KVConfig: opened, kv: kv}, nil
}

// ErrTaken is returned by Take when another holder has the claim (or it
// is done).
var ErrTaken = errors.New("claimed by another holder")

// Take claims key for holder for lease (at least a second: the server's
// TTL resolution). It returns the revision to finish it at; ErrTaken when
// it is held or done.
func (c *Claims) Take(ctx context.Context, key, holder string, lease time.Duration) (uint64, error) {
	data, _ := json.Marshal(Claim{Holder: holder, At: time.Now().UnixMilli()})
	rev, err := c.kv.Create(ctx, key, data, jetstream.KeyTTL(max(lease, time.Second)))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrTaken
	}
	if err != nil {
		return 0, fmt.Errorf("claim %s: %w", key, err)
	}
	return rev, nil
}

// Finish marks a claim taken at rev done (no TTL: it stays until MaxAge).
// It fails if the lease ran out and someone else took the key meanwhile.
func (c *Claims) Finish(ctx context.Context, key, holder string, rev uint64) error {
	data, _ := json.Marshal(Claim{Holder: holder, At: time.Now().UnixMilli(), Done: true})
	if _, err := c.kv.Update(ctx, key, data, rev); err != nil {
		return fmt.Errorf("finish claim %s: %w", key, err)
	}
	return nil
}

// Release gives a claim up before its lease ends, so another gateway may
// take it at once (a delivery that failed and should be retried).
func (c *Claims) Release(ctx context.Context, key string, rev uint64) error {
	return c.kv.Delete(ctx, key, jetstream.LastRevision(rev))
}

// Get returns the claim on key; jetstream.ErrKeyNotFound when none.
func (c *Claims) Get(ctx context.Context, key string) (*Claim, error) {
	e, err := c.kv.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var cl Claim
	if err := json.Unmarshal(e.Value(), &cl); err != nil {
		return nil, fmt.Errorf("claim %s: %w", key, err)
	}
	return &cl, nil
}
