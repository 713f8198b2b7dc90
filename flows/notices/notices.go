// Package notices turns signal-log events into parent notices: it appends
// an event to the signal log (streams/signals) and, for the kinds that
// notify (signals.Notifies), raises the material watermark of every
// watcher of the session (kv/watchers) and publishes one notice per
// watcher that had none pending to the watcher's subject on SB_EVENTS
// (streams/events, <prefix>.session.<watcher>.notice). Every gateway
// receives each notice; one claims it and delivers it (gateway package).
// Workers (the ingress, sessions_spawn) and gateways (run outcomes) record
// through the same Recorder, so the fan-out lives once.
package notices

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/streams/events"
	"github.com/sessionbus/sessionbus/streams/signals"
)

// Body is a notice event's body on SB_EVENTS.
type Body struct {
	Watcher          string `json:"watcher"`
	Target           string `json:"target"`
	LastSeenSequence uint64 `json:"lastSeenSequence"`
	Text             string `json:"text"`
	ContextKey       string `json:"contextKey"`
}

// ID names one notice: the watcher, the target and the version it was
// opened at (a follow-up after an acknowledgement has a later one). It is
// the event's message id, the delivery claim and the waking run's id, so
// however often a notice is published or swept, it wakes its watcher once.
func ID(n watchers.Notice) string {
	return bus.DerivedUUID("sessionbus/notice", n.Watcher, n.Target, strconv.FormatUint(n.LastSeenSequence, 10))
}

// BodyOf is the event body of n.
func BodyOf(n watchers.Notice) Body {
	return Body{Watcher: n.Watcher, Target: n.Target, LastSeenSequence: n.LastSeenSequence, Text: n.Text(), ContextKey: n.ContextKey()}
}

// Recorder appends signal-log events and publishes the notices they open.
type Recorder struct {
	Log      *signals.Log
	Watchers *watchers.Store
	Events   *events.Stream
	Logger   *slog.Logger
}

// Record appends ev and, if its kind notifies, marks the target's watchers
// (its cursor holders plus extra, producer-supplied watchers such as the
// parent) and publishes the notices that opened. A duplicate (same
// DedupeKey) opens nothing. The returned event carries its sequence.
func (r *Recorder) Record(ctx context.Context, ev signals.Event, extra ...string) (signals.Event, error) {
	stored, dup, err := r.Log.Append(ctx, ev)
	if err != nil {
		return stored, fmt.Errorf("record %s for %s: %w", ev.Kind, ev.SessionKey, err)
	}
	if dup || !signals.Notifies(ev.Kind) {
		return stored, nil
	}
	actor := ""
	if ev.ActorType == signals.ActorAgent {
		actor = ev.ActorID // an agent's own change never notifies it
	}
	ns, err := r.Watchers.MarkMaterial(ctx, ev.SessionKey, stored.Sequence, actor, extra...)
	return stored, errors.Join(err, r.Publish(ctx, ns...))
}

// Publish puts notices on their watchers' subjects.
func (r *Recorder) Publish(ctx context.Context, ns ...watchers.Notice) error {
	var errs []error
	for _, n := range ns {
		body, _ := json.Marshal(BodyOf(n))
		err := r.Events.Publish(ctx, &events.Event{Kind: events.KindNotice, ID: ID(n), SessionKey: n.Watcher, Body: body})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Watched reports whether any session watches key (a human turn into a
// session with neither a parent nor a watcher is not recorded).
func (r *Recorder) Watched(ctx context.Context, key string) (bool, error) {
	cs, err := r.Watchers.ForTarget(ctx, key)
	return len(cs) > 0, err
}
