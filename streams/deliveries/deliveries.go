// Package deliveries is the SB_DELIVER stream: outbound messages (replies,
// agent-to-agent announces) for channel adapters, one subject per channel,
// kept for a bounded time so an adapter that was down can catch up.
package deliveries

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// DedupeWindow is how long a repeated delivery id (a resumed flow
// publishing its announce again) is dropped by the stream itself.
const DedupeWindow = 10 * time.Minute

// Delivery is the body published to <prefix>.deliver.<channel>.
type Delivery struct {
	Channel    string `json:"channel"`
	To         string `json:"to"`
	AccountID  string `json:"accountId,omitempty"`
	ThreadID   string `json:"threadId,omitempty"`
	Message    string `json:"message"`
	SessionKey string `json:"sessionKey"`
	RunID      string `json:"runId"`
}

// Stream publishes deliveries.
type Stream struct {
	bus.StreamConfig // recreated by bus.Guard
	js               jetstream.JetStream
	names            bus.Names
	st               jetstream.Stream
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new stream.
var WithReplicas = bus.WithReplicas

// WithMaxAge sets how long the stream keeps a delivery (bus.deliverMaxAge;
// default 0: no limit), and so its dedupe window, at most DedupeWindow.
var WithMaxAge = bus.WithMaxAge

// Open creates SB_DELIVER if absent. An existing stream keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Stream, error) {
	o := bus.ApplyStoreOptions(opts)
	cfg := jetstream.StreamConfig{
		Name:        names.DeliverStream(),
		Description: "sessionbus outbound deliveries to channel adapters",
		Subjects:    []string{names.Deliver(">")},
		Storage:     jetstream.FileStorage,
		Replicas:    max(o.Replicas, 1),
		Duplicates:  min(DedupeWindow, o.MaxAge),
		MaxAge:      o.MaxAge,
	}
	st, opened, err := bus.OpenStream(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	return &Stream{StreamConfig: opened, js: js, names: names, st: st}, nil
}

// Publish captures d on its channel's subject; msgID dedupes a re-publish.
func (s *Stream) Publish(ctx context.Context, d Delivery, msgID string) error {
	body, err := json.Marshal(d)
	if err != nil {
		return err
	}
	m := nats.NewMsg(s.names.Deliver(SubjectToken(d.Channel)))
	m.Data = body
	if _, err := s.js.PublishMsg(ctx, m, jetstream.WithMsgID(msgID)); err != nil {
		return fmt.Errorf("deliver to %s: %w", d.Channel, err)
	}
	return nil
}

// SubjectToken makes a channel name usable as one subject token.
func SubjectToken(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch c {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "unknown"
	}
	return string(b)
}
