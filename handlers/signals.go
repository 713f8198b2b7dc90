package handlers

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/flows/notices"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// signalLog is the real signal log as session_status reads it.
type signalLog struct{ l *signals.Log }

func (s signalLog) StateVersion(ctx context.Context, key string) (uint64, error) {
	return s.l.StateVersion(ctx, key)
}

// headWave is a StateLog whose version read can go out in the wave of
// session_status's transcript read: one wait, no goroutine of its own.
type headWave interface {
	StateVersionRequest(sessionKey string) *nats.Msg
	StateVersionReply(ctx context.Context, sessionKey string, m *nats.Msg) (uint64, error)
}

func (s signalLog) StateVersionRequest(key string) *nats.Msg { return s.l.StateVersionRequest(key) }

func (s signalLog) StateVersionReply(ctx context.Context, key string, m *nats.Msg) (uint64, error) {
	return s.l.StateVersionReply(ctx, key, m)
}

func (s signalLog) Since(ctx context.Context, key string, after uint64, limit int) (StateChanges, error) {
	c, err := s.l.Since(ctx, key, after, limit)
	events := make([]map[string]any, 0, len(c.Events))
	for _, ev := range c.Events {
		events = append(events, signals.Project(ev))
	}
	return StateChanges{Events: events, Truncated: c.Truncated, EarliestAvailableSequence: c.EarliestAvailableSequence, HistoryGap: c.HistoryGap}, err
}

// humanTurnRecorder logs an accepted human turn as human_direct_message
// and notifies the session's watchers; the parent is a
// producer-supplied watcher, so a child spawned before watch cursors
// existed still tells it. A turn into a session with neither a parent nor
// a watcher is not recorded, as in OpenClaw.
func humanTurnRecorder(rec *notices.Recorder) HumanTurnHook {
	return func(ctx context.Context, t HumanTurn) error {
		parent := rules.FirstNonEmpty(t.SpawnedBy, t.ParentSessionKey)
		if parent == "" {
			watched, err := rec.Watched(ctx, t.SessionKey)
			if err != nil || !watched {
				return err
			}
		}
		channel := rules.FirstNonEmpty(t.Channel, "unknown")
		var extra []string
		if parent != "" {
			extra = append(extra, parent)
		}
		_, err := rec.Record(ctx, signals.Event{
			DedupeKey: t.DedupeKey, SessionKey: t.SessionKey, SessionID: t.SessionID, AgentID: t.AgentID,
			Kind: signals.KindHumanDirectMessage, ActorType: signals.ActorHuman, ActorID: t.From, RunID: t.RunID,
			OccurredAt: t.OccurredAt, Summary: "human message via " + channel,
			Payload: map[string]any{"channel": channel},
		}, extra...)
		return err
	}
}
