package signals

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// StateVersion is the session's head: the sequence of its newest event, kept
// after pruning; 0 when it has none. It reads one KV record.
func (l *Log) StateVersion(ctx context.Context, sessionKey string) (uint64, error) {
	h, _, err := l.heads.Get(ctx, bus.EncodeKey(sessionKey))
	return l.stateVersion(sessionKey, h, err)
}

// StateVersionRequest is the read StateVersion makes, for a caller that
// sends it in a wave with reads of its own; StateVersionReply is
// StateVersion's answer from its reply.
func (l *Log) StateVersionRequest(sessionKey string) *nats.Msg {
	return l.heads.GetRequest(bus.EncodeKey(sessionKey))
}

// StateVersionReply: see StateVersionRequest.
func (l *Log) StateVersionReply(ctx context.Context, sessionKey string, m *nats.Msg) (uint64, error) {
	h, _, err := l.heads.GetReply(ctx, bus.EncodeKey(sessionKey), m)
	return l.stateVersion(sessionKey, h, err)
}

func (l *Log) stateVersion(sessionKey string, h *head, err error) (uint64, error) {
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("signal log: head of %s: %w", sessionKey, err)
	}
	return h.LastSequence, nil
}
