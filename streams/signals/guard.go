package signals

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Streams are SB_SIGNALS and the heads bucket's stream (see bus.Guard).
func (l *Log) Streams() []string {
	return append([]string{l.streamCfg.Name}, l.headsCfg.Streams()...)
}

// Recreate creates the deleted stream or bucket again (see bus.Guard).
//
// A new SB_SIGNALS starts past the highest sequence any head names: the
// heads outlive the deleted events, so a session's state version never goes
// back, a new event is newer than every version a caller has seen, and a
// changesSince below a head reports the lost events as a history gap
// instead of an empty delta. A new heads bucket starts empty: a session's
// version is then its next event's sequence.
func (l *Log) Recreate(ctx context.Context, deleted string) error {
	if deleted != l.streamCfg.Name {
		return l.headsCfg.Recreate(ctx, deleted)
	}
	top, err := l.highestHead(ctx)
	if err != nil {
		return fmt.Errorf("signal log: read the heads before recreating %s: %w", deleted, err)
	}
	cfg := l.streamCfg
	cfg.FirstSeq = top + 1
	_, _, err = bus.OpenStream(ctx, l.js, cfg)
	return err
}

// highestHead is the largest LastSequence in the heads bucket.
func (l *Log) highestHead(ctx context.Context) (uint64, error) {
	w, err := l.heads.KV().WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return 0, err
	}
	defer func() { _ = w.Stop() }()
	var top uint64
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return 0, fmt.Errorf("heads watch closed")
			}
			if e == nil { // every current head read
				return top, nil
			}
			var h head
			if err := json.Unmarshal(e.Value(), &h); err != nil {
				l.log.Warn("signal log: skipping an unreadable head", "key", e.Key(), "err", err)
				continue
			}
			top = max(top, h.LastSequence, h.PrunedMaxSequence)
		}
	}
}
