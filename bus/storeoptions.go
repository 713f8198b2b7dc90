package bus

import "time"

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
