// Package lanes is the `lanes` bucket: one lock per session, so a session
// runs one turn at a time whichever gateway takes its runs. A held lane is a
// lease the server times: every write of a held lane carries a per-message
// TTL, so the server itself removes the lock of a holder that stopped
// refreshing it. No gateway compares its clock with another's, so clock
// skew between hosts cannot end a lease early or keep a dead one alive.
package lanes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// ErrBusy means another run holds the session's lane.
var ErrBusy = errors.New("session lane busy")

// Lock is the value of a session's key. A held lane names its run; a
// released one is written back with no run and no TTL rather than deleted,
// so the next taker can compare-and-set against the revision the release
// returned (a Create over a delete marker costs three round trips, a CAS
// one).
type Lock struct {
	RunID   string `json:"runId,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	// ExpiresAt is the wall-clock expiry (unix ms) that versions before the
	// server-timed lease wrote instead of a TTL. This code never writes it;
	// a held lock that carries it is judged by it, so a lane left behind by
	// an older gateway still expires.
	ExpiresAt int64 `json:"expiresAt,omitempty"`
}

var free = []byte(`{}`)

// Lanes is the bucket, seen by one owner (a gateway id).
type Lanes struct {
	kv       jetstream.KeyValue
	js       jetstream.JetStream
	names    bus.Names
	replicas int
	owner    string
	lease    time.Duration
	// Finished, when set, reports whether a run recorded its outcome
	// together with the end of its turn (runs.Record.FreesLane): a lane
	// still naming such a run is free. Its holder then need not write a
	// release: one write fewer per turn. Nil: only a released (or
	// expired) lane is free.
	Finished func(ctx context.Context, runID string) (bool, error)
}

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// Open creates the lanes bucket if absent and makes sure its stream takes
// per-message TTLs (a bucket made by an older version gets the flag turned
// on; it cannot be turned off again). The lanes are seen by owner (a
// gateway id); lease is how long a lock outlives its last refresh (at least
// a second: the server's TTL resolution).
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, owner string, lease time.Duration, opts ...Option) (*Lanes, error) {
	o := bus.ApplyStoreOptions(opts)
	if lease < time.Second {
		return nil, fmt.Errorf("lane lease %s is shorter than 1s", lease)
	}
	kv, err := ensure(ctx, js, names, o.Replicas)
	if err != nil {
		return nil, err
	}
	return &Lanes{kv: kv, js: js, names: names, replicas: o.Replicas, owner: owner, lease: lease}, nil
}

// ensure creates the bucket if absent and turns on per-message TTLs.
func ensure(ctx context.Context, js jetstream.JetStream, names bus.Names, replicas int) (jetstream.KeyValue, error) {
	kv, _, err := bus.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      names.LanesBucket(),
		Description: "sessionbus session lanes: one run at a time per session (held locks expire by server TTL)",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, bus.KVStream(kv.Bucket()))
	if err != nil {
		return nil, fmt.Errorf("lanes bucket stream: %w", err)
	}
	if cfg := st.CachedInfo().Config; !cfg.AllowMsgTTL {
		cfg.AllowMsgTTL = true
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("lanes bucket %s needs per-message TTL (allow_msg_ttl, nats-server 2.11 or later): %w", kv.Bucket(), err)
		}
	}
	return kv, nil
}

// Streams is the bucket's stream (see bus.Guard).
func (ls *Lanes) Streams() []string { return []string{bus.KVStream(ls.names.LanesBucket())} }

// Recreate creates the bucket again after it was deleted (see bus.Guard):
// every lane is free then, which the runs holding one find out when their
// next refresh fails.
func (ls *Lanes) Recreate(ctx context.Context, _ string) error {
	_, err := ensure(ctx, ls.js, ls.names, ls.replicas)
	return err
}

// Lane is a held lock. Refresh and Release use its revision, so a lock
// taken over by another run after the server expired this one is never
// refreshed or released here.
type Lane struct {
	ls  *Lanes
	key string
	val Lock
	rev uint64
	// resumed: taken by compare-and-set from the owner's own freedAt, so
	// no other owner held the lane since this one last did
	resumed bool
}

// Resumed reports that the lane was taken from the revision its owner
// last held or released it at (Acquire's freedAt): no other owner held it
// in between, so what the owner remembers of the session since is still
// what the other gateways left (only writers outside the lane can have
// moved it).
func (l *Lane) Resumed() bool { return l.resumed }

// Key is the lane's bucket key (the encoded session key).
func (l *Lane) Key() string { return l.key }

// Acquire takes the session's lane for runID: a compare-and-set from
// freedAt (the revision this owner released the lane at, 0 if unknown),
// else a read and a compare-and-set over a free lock or one this same run
// left behind (a redelivery after its gateway died or its ack wait ran
// out), else a create for a lane never taken or expired. ErrBusy when
// another run holds it.
func (ls *Lanes) Acquire(ctx context.Context, sessionKey, runID string, freedAt uint64) (*Lane, error) {
	l := &Lane{ls: ls, key: bus.EncodeKey(sessionKey), val: Lock{RunID: runID, Gateway: ls.owner}}
	if freedAt > 0 {
		err := l.write(ctx, freedAt)
		if err == nil {
			l.resumed = true
			return l, nil
		}
		if !bus.IsWrongLastSeq(err) {
			return nil, err
		}
	}
	e, err := ls.kv.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// never taken, or expired by the server: expect no message at all
		if err := l.write(ctx, 0); err != nil {
			if bus.IsWrongLastSeq(err) {
				return nil, ErrBusy // taken meanwhile
			}
			return nil, err
		}
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	var cur Lock
	_ = json.Unmarshal(e.Value(), &cur)
	held := cur.RunID != ""
	legacyExpired := cur.ExpiresAt > 0 && cur.ExpiresAt < time.Now().UnixMilli()
	mine := cur.RunID == runID && cur.Gateway == ls.owner
	if held && !mine && !legacyExpired {
		if ls.Finished == nil {
			return nil, ErrBusy
		}
		done, err := ls.Finished(ctx, cur.RunID)
		if err != nil {
			return nil, fmt.Errorf("lane of %s: is run %s over: %w", sessionKey, cur.RunID, err)
		}
		if !done {
			return nil, ErrBusy
		}
	}
	if err := l.write(ctx, e.Revision()); err != nil {
		if bus.IsWrongLastSeq(err) {
			return nil, ErrBusy
		}
		return nil, err
	}
	return l, nil
}

// write stores the held lock with the lease as its TTL, expecting the key's
// last revision to be rev.
func (l *Lane) write(ctx context.Context, rev uint64) error {
	data, _ := json.Marshal(l.val)
	seq, err := record.PutLease(ctx, l.ls.js, l.ls.kv, l.key, data, rev, l.ls.lease)
	if err != nil {
		return err
	}
	l.rev = seq
	return nil
}

// Rev is the revision the lock was last written at. A holder whose run
// ended with its outcome marked FreesLane can take the lane again from it
// (Acquire's freedAt) without releasing it in between.
func (l *Lane) Rev() uint64 { return l.rev }

// Refresh restarts the lease; false when the lock was lost (expired and
// taken, or written by someone else).
func (l *Lane) Refresh(ctx context.Context) bool {
	return l.write(ctx, l.rev) == nil
}

// Release frees the lane and returns the revision it was freed at, for the
// owner's next Acquire of the same session.
func (l *Lane) Release(ctx context.Context) (uint64, error) {
	return l.ls.kv.Update(ctx, l.key, free, l.rev)
}
