package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StoreOptions are the settings every store's Open takes (kv/..., streams/...):
// the replica count of a bucket or stream it creates, and, for the stores
// whose data ages, how long an entry outlives its last write. A store that
// does not age ignores MaxAge; each store documents its default at Open.
type StoreOptions struct {
	Replicas int
	MaxAge   time.Duration
}

// StoreOption sets one of the StoreOptions, in nats.go jetstream's
// functional-option manner; the stores re-export these as their own
// WithReplicas and WithMaxAge.
type StoreOption func(*StoreOptions)

// WithReplicas sets the replica count of a new bucket or stream (3 on a
// 3-node cluster; unset: 1, or the server's default where a store says so).
func WithReplicas(n int) StoreOption { return func(o *StoreOptions) { o.Replicas = n } }

// WithMaxAge sets how long an entry outlives its last write (a bucket's
// TTL, a stream's MaxAge); 0 or unset: the store's default.
func WithMaxAge(d time.Duration) StoreOption { return func(o *StoreOptions) { o.MaxAge = d } }

// ApplyStoreOptions applies opts in order to the zero options.
func ApplyStoreOptions(opts []StoreOption) StoreOptions {
	var o StoreOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Bucket is what sets one store's bucket apart; OpenBucket writes the
// rest once for every kv store.
type Bucket struct {
	Name, Description string
	// Ages says entries outlive their last write by the options' MaxAge,
	// Age when it is unset (0: no limit); without it MaxAge is ignored
	Ages bool
	Age  time.Duration
	// LimitMarkerTTL keeps a marker of an aged-out key (per-key TTLs)
	LimitMarkerTTL time.Duration
}

// OpenBucket opens (creating if absent) b with opts applied: file storage,
// one value per key, the options' replica count (1 when unset), and for an
// ageing store its TTL. An existing bucket keeps its settings (OpenKV).
func OpenBucket(ctx context.Context, js jetstream.JetStream, b Bucket, opts ...StoreOption) (jetstream.KeyValue, KVConfig, error) {
	o := ApplyStoreOptions(opts)
	cfg := jetstream.KeyValueConfig{
		Bucket:         b.Name,
		Description:    b.Description,
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       max(o.Replicas, 1),
		LimitMarkerTTL: b.LimitMarkerTTL,
	}
	if b.Ages {
		cfg.TTL = b.Age
		if o.MaxAge > 0 {
			cfg.TTL = o.MaxAge
		}
	}
	return OpenKV(ctx, js, cfg)
}
