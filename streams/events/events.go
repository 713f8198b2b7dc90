// Package events is the SB_EVENTS stream: parent notices and sub-agent
// announces, published to the receiving session's subject
// <prefix>.session.<key>.<kind>. Every gateway follows the whole stream (an
// ordered consumer of its own), so each replica receives each event; the
// claims bucket picks the one that delivers it. The stream keeps events
// for ops (`nats stream view SB_EVENTS`) and replay; delivery never
// depends on a gateway having been up when an event was published: the
// state an event comes from (a child's registry record, a watch cursor)
// says it is undelivered, and a sweep publishes it again.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Kinds of event (the last subject token).
const (
	KindAnnounce = "announce"
	KindNotice   = "notice"
)

// DefaultMaxAge is how long SB_EVENTS keeps an event.
const DefaultMaxAge = 7 * 24 * time.Hour

// DedupeWindow is how long a repeated event id is dropped by the server.
const DedupeWindow = 10 * time.Minute

// Event is one message on SB_EVENTS.
type Event struct {
	Kind       string          `json:"kind"`
	ID         string          `json:"id"`         // stable: the Nats-Msg-Id and the claim key
	SessionKey string          `json:"sessionKey"` // the receiving session (requester, watcher)
	CreatedAt  int64           `json:"createdAt"`
	Body       json.RawMessage `json:"body"` // kind-specific
}

// Stream is SB_EVENTS.
type Stream struct {
	bus.StreamConfig // recreated by bus.Guard
	js               jetstream.JetStream
	names            bus.Names
	name             string
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new stream.
var WithReplicas = bus.WithReplicas

// WithMaxAge sets how long the stream keeps an event (0 or unset:
// DefaultMaxAge).
var WithMaxAge = bus.WithMaxAge

// Open creates SB_EVENTS if absent. An existing stream keeps its settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Stream, error) {
	o := bus.ApplyStoreOptions(opts)
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	cfg := jetstream.StreamConfig{
		Name:        names.EventsStream(),
		Description: "sessionbus parent notices and sub-agent announces, per receiving session",
		Subjects:    []string{names.SessionEvents()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(o.Replicas, 1),
		MaxAge:      o.MaxAge,
		Duplicates:  DedupeWindow,
		AllowDirect: true,
	}
	_, opened, err := bus.OpenStream(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	return &Stream{StreamConfig: opened, js: js, names: names, name: cfg.Name}, nil
}

// Publish appends ev to its session's subject with Nats-Msg-Id = ev.ID, so
// a repeated publish (a retried step, a sweep) within DedupeWindow is
// dropped by the server.
func (s *Stream) Publish(ctx context.Context, ev *Event) error {
	if ev.CreatedAt == 0 {
		ev.CreatedAt = time.Now().UnixMilli()
	}
	data, err := bus.Marshal(ev)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(s.names.SessionEvent(bus.EncodeKey(ev.SessionKey), ev.Kind))
	msg.Data = data
	for attempt := 0; ; attempt++ {
		_, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(ev.ID))
		if err == nil {
			return nil
		}
		// the same event still being stored (a retry around a leader
		// change): its acknowledgement comes back as a duplicate soon
		if !bus.IsMsgIDInProcess(err) || attempt == inProcessRetries {
			return fmt.Errorf("publish %s %s: %w", ev.Kind, ev.ID, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("publish %s %s: %w", ev.Kind, ev.ID, err)
		case <-time.After(inProcessWait):
		}
	}
}

// inProcessRetries and inProcessWait bound the retries of a publish whose
// message id is still being stored.
const (
	inProcessRetries = 20
	inProcessWait    = 100 * time.Millisecond
)

// Follow delivers every event published from now on to fn, in order, until
// ctx ends. Each follower has its own ordered consumer (no server state to
// clean up when a gateway dies). kinds filters by kind (none: all).
func (s *Stream) Follow(ctx context.Context, log *slog.Logger, fn func(*Event), kinds ...string) error {
	// Keys span several subject tokens, so kinds cannot be told apart by a
	// subject filter: the kind is checked on the decoded event.
	cfg := jetstream.OrderedConsumerConfig{
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		FilterSubjects: []string{s.names.SessionEvents()},
	}
	cons, err := s.js.OrderedConsumer(ctx, s.name, cfg)
	if err != nil {
		return fmt.Errorf("follow %s: %w", s.name, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev Event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			log.Warn("events: skipping a malformed event", "subject", m.Subject(), "err", err)
			return
		}
		if len(kinds) > 0 && !slices.Contains(kinds, ev.Kind) {
			return
		}
		fn(&ev)
	})
	if err != nil {
		return fmt.Errorf("follow %s: %w", s.name, err)
	}
	context.AfterFunc(ctx, cc.Stop)
	return nil
}
