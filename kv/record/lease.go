package record

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PutLease writes data to key only if the key's last revision is still rev,
// with ttl as the message's TTL, and returns the new revision. The TTL makes
// the write a lease: if its holder stops refreshing it (a crashed process),
// the server removes it and another holder may take the key. Lanes and
// sub-agent slots both hold their keys this way.
func PutLease(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, key string, data []byte, rev uint64, ttl time.Duration) (uint64, error) {
	m := nats.NewMsg(Subject(kv, key))
	m.Data = data
	ack, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
