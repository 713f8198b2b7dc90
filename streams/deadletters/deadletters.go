// Package deadletters is the SB_DEADLETTER stream: the deliveries a channel
// adapter gave up on after its last retry, one subject per channel, kept
// until an operator has looked at them (`sessionbus inspect` lists them).
package deadletters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Bounds of the stream: dead letters are rare, and the oldest go first
// when a broken receiver produces many.
const (
	MaxMsgs  = 100_000
	MaxBytes = 256 << 20
	// DedupeWindow drops a second record of one delivery: an adapter that
	// died between recording a dead letter and acking the delivery records
	// it again after the redelivery's retries.
	DedupeWindow = 2 * time.Hour
)

// Record is one dead letter.
type Record struct {
	DeliveryID string `json:"deliveryId"`
	Channel    string `json:"channel"` // a channel id (bus.NormalizeChannel): one subject token
	SessionKey string `json:"sessionKey,omitempty"`
	URL        string `json:"url"`
	Attempts   int    `json:"attempts"`
	LastStatus int    `json:"lastStatus,omitempty"` // the receiver's last HTTP status; 0: no answer
	LastError  string `json:"lastError"`
	FailedAt   int64  `json:"failedAt"` // unix ms
	Adapter    string `json:"adapter,omitempty"`
	// Delivery is what could not be delivered, as the gateway published it
	// to SB_DELIVER.
	Delivery json.RawMessage `json:"delivery"`
}

// Stream is SB_DEADLETTER.
type Stream struct {
	bus.StreamConfig // recreated by bus.Guard
}

// Open creates SB_DEADLETTER if absent. An existing stream keeps its
// settings. Workers and gateways open it; adapters only publish to it.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, replicas int) (*Stream, error) {
	_, opened, err := bus.OpenStream(ctx, js, Config(names, replicas))
	if err != nil {
		return nil, err
	}
	return &Stream{StreamConfig: opened}, nil
}

// Config is the stream's configuration.
func Config(names bus.Names, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        names.DeadLetterStream(),
		Description: "sessionbus deliveries a channel adapter gave up on",
		Subjects:    []string{names.DeadLetter(">")},
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		MaxMsgs:     MaxMsgs,
		MaxBytes:    MaxBytes,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DedupeWindow,
	}
}

// Publish records r on its channel's subject; a second record of the same
// delivery id within DedupeWindow is dropped by the stream.
func Publish(ctx context.Context, js jetstream.JetStream, names bus.Names, r Record) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	m := nats.NewMsg(names.DeadLetter(r.Channel))
	m.Data = body
	if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(r.DeliveryID+":dead")); err != nil {
		return fmt.Errorf("record the dead letter of delivery %s: %w", r.DeliveryID, err)
	}
	return nil
}

// Entry is a stored dead letter with its stream sequence.
type Entry struct {
	Seq uint64 `json:"seq"`
	Record
}

// Last reads up to n of the newest dead letters, oldest first; a missing
// stream has none.
func Last(ctx context.Context, js jetstream.JetStream, names bus.Names, n int) ([]Entry, error) {
	st, err := js.Stream(ctx, names.DeadLetterStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	if info.State.Msgs == 0 || n <= 0 {
		return out, nil
	}
	from := info.State.FirstSeq
	if info.State.LastSeq >= uint64(n) && info.State.LastSeq-uint64(n)+1 > from {
		from = info.State.LastSeq - uint64(n) + 1
	}
	for seq := from; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		var r Record
		if json.Unmarshal(m.Data, &r) == nil {
			out = append(out, Entry{Seq: seq, Record: r})
		}
	}
	return out, nil
}
