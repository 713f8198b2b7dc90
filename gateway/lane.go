package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/kv"
)

// laneLock is the value of a session's key in the lanes bucket while a run
// holds the session.
type laneLock struct {
	RunID     string `json:"runId"`
	Gateway   string `json:"gateway"`
	ExpiresAt int64  `json:"expiresAt"` // unix ms
}

// lane is a held lock; refresh and release use its revision, so a lock taken
// over by another replica after expiry is never refreshed or deleted here.
type lane struct {
	g   *Gateway
	key string
	val laneLock
	rev uint64
}

var errLaneBusy = errors.New("session lane busy")

// acquireLane takes the session's lane for runID: Create, or a CAS takeover
// of an expired lock or of one this same run left behind (a redelivery after
// its gateway died or its ack wait ran out).
func (g *Gateway) acquireLane(ctx context.Context, sessionKey, runID string) (*lane, error) {
	l := &lane{g: g, key: kv.EncodeKey(sessionKey)}
	l.val = laneLock{RunID: runID, Gateway: g.id, ExpiresAt: time.Now().Add(g.ackWait).UnixMilli()}
	data, _ := json.Marshal(l.val)
	rev, err := g.lanes.Create(ctx, l.key, data)
	if err == nil {
		l.rev = rev
		return l, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, err
	}
	e, err := g.lanes.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, errLaneBusy // released meanwhile: retry soon
	}
	if err != nil {
		return nil, err
	}
	var cur laneLock
	_ = json.Unmarshal(e.Value(), &cur)
	expired := cur.ExpiresAt < time.Now().UnixMilli()
	mine := cur.RunID == runID && cur.Gateway == g.id
	if !expired && !mine {
		return nil, errLaneBusy
	}
	rev, err = g.lanes.Update(ctx, l.key, data, e.Revision())
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, errLaneBusy
		}
		return nil, err
	}
	l.rev = rev
	return l, nil
}

// refresh extends the lock; false when it was lost.
func (l *lane) refresh(ctx context.Context) bool {
	l.val.ExpiresAt = time.Now().Add(l.g.ackWait).UnixMilli()
	data, _ := json.Marshal(l.val)
	rev, err := l.g.lanes.Update(ctx, l.key, data, l.rev)
	if err != nil {
		return false
	}
	l.rev = rev
	return true
}

func (l *lane) release(ctx context.Context) {
	if err := l.g.lanes.Delete(ctx, l.key, jetstream.LastRevision(l.rev)); err != nil {
		l.g.log.Debug("release lane", "key", l.key, "err", err)
	}
}
