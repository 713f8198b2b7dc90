package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
)

// OpenBucket gives every store the same skeleton: file storage, one value
// per key, the options' replicas, and a TTL only for an ageing store (its
// default, or the options' MaxAge).
func TestOpenBucket(t *testing.T) {
	s := bustest.Server(t)
	_, js := bustest.Connect(t, s)
	ctx := bustest.Context(t)
	cases := []struct {
		b    bus.Bucket
		opts []bus.StoreOption
		ttl  time.Duration
	}{
		{bus.Bucket{Name: "PLAIN"}, []bus.StoreOption{bus.WithMaxAge(time.Hour)}, 0}, // does not age: MaxAge ignored
		{bus.Bucket{Name: "AGED", Ages: true, Age: 2 * time.Hour}, nil, 2 * time.Hour},
		{bus.Bucket{Name: "SET", Ages: true, Age: 2 * time.Hour}, []bus.StoreOption{bus.WithMaxAge(time.Hour)}, time.Hour},
		{bus.Bucket{Name: "UNLIMITED", Ages: true}, nil, 0},
	}
	for _, c := range cases {
		kv, _, err := bus.OpenBucket(ctx, js, c.b, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
		if st.TTL() != c.ttl || st.History() != 1 || cfg.Storage != jetstream.FileStorage || cfg.Replicas != 1 {
			t.Errorf("%s: ttl %v history %d storage %v replicas %d", c.b.Name, st.TTL(), st.History(), cfg.Storage, cfg.Replicas)
		}
	}
}
