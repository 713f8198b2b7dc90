package bus_test

import (
	"fmt"
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

// A publish whose message id is still being stored is told apart from
// every other refusal, wrapped or not: its callers retry it.
func TestIsMsgIDInProcess(t *testing.T) {
	inProcess := &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}
	if !bus.IsMsgIDInProcess(inProcess) || !bus.IsMsgIDInProcess(fmt.Errorf("publish: %w", inProcess)) {
		t.Fatal("10158 not recognised")
	}
	for _, err := range []error{nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, fmt.Errorf("x")} {
		if bus.IsMsgIDInProcess(err) {
			t.Fatalf("%v taken for a message id in process", err)
		}
	}
}
