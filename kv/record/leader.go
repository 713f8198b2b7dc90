package record

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// A KV bucket answers gets with direct gets, which any replica of a
// replicated bucket may serve. A follower that has not caught up (a node
// restarting after a leader moved, say) answers "not found" for a key whose
// write was already acknowledged: a sub-agent's registry record, read by
// the gateway that runs the child, looked missing for 15 s in the cluster
// fault test. So on a replicated bucket a "not found" is confirmed with the
// stream leader, which alone serves $JS.API.STREAM.MSG.GET. A single-node
// bucket has no follower to lag and pays nothing.

// replicas caches the bucket's replica count (0: not read yet).
type replicas struct{ n atomic.Int32 }

func (b Bucket[T]) replicated(ctx context.Context) bool {
	if b.rep == nil {
		return false
	}
	n := b.rep.n.Load()
	if n == 0 {
		st, err := b.kv.Status(ctx)
		if err != nil {
			return false // cannot tell: keep the direct get's answer
		}
		ks, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok {
			return false
		}
		n = int32(max(ks.StreamInfo().Config.Replicas, 1))
		b.rep.n.Store(n)
	}
	return n > 1
}

// leaderGet reads key's last value from the stream leader
// (bus.LeaderGetRequest, as the transcript store does). found is false
// when the key holds nothing or its last operation deleted or purged it.
func (b Bucket[T]) leaderGet(ctx context.Context, key string) (data []byte, rev uint64, found bool, err error) {
	stream := "KV_" + b.kv.Bucket()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	m, err := b.js.Conn().RequestMsgWithContext(ctx, bus.LeaderGetRequest(jetstream.DefaultAPIPrefix, stream, 0, Subject(b.kv, key)))
	if err == nil {
		m, err = bus.LeaderGetReply(stream, m)
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("%s %s: read from the stream leader: %w", b.noun, key, err)
	}
	switch st := m.Header.Get("Status"); st {
	case "":
	case "404":
		return nil, 0, false, nil
	default:
		return nil, 0, false, fmt.Errorf("%s %s: read from the stream leader: status %s %s", b.noun, key, st, m.Header.Get("Description"))
	}
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return nil, 0, false, nil
	}
	rev, _ = strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	return m.Data, rev, true, nil
}
