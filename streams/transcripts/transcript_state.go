package transcripts

// Reading a transcript's state: the index head and, with the probe, the
// newest entry, reconciled (repaired with a write) or, for readers and
// cursors, extended in memory from what the newest entry lists.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sessionbus/sessionbus/bus"
)

// loadState reads the head and, when probe is set, reconciles it with the
// stream (the last-for-subject probe is pipelined with the head get, so a
// consistent read costs one round trip). It returns the head and, when the
// probe confirmed it, the newest entry (callers may reuse it).
func (t *Store) loadState(ctx context.Context, p *pipe, encKey string, probe bool) (*head, *rawEntry, error) {
	return t.loadStateLag(ctx, p, encKey, probe, false)
}

// readState is loadState with the probe for a reader or a cursor: a head
// that lags the newest entry by what that entry lists (Sb-Unindexed) comes
// back extended in memory (virtualHead) instead of repaired with a write.
func (t *Store) readState(ctx context.Context, p *pipe, encKey string) (*head, *rawEntry, error) {
	return t.loadStateLag(ctx, p, encKey, true, true)
}

func (t *Store) loadStateLag(ctx context.Context, p *pipe, encKey string, probe, lag bool) (*head, *rawEntry, error) {
	for attempt := 0; attempt < maxRepairAttempts; attempt++ {
		h, top, err := t.fetchState(ctx, p, encKey, probe)
		if err != nil {
			return nil, nil, err
		}
		if lag && !consistent(h, top) {
			if v := virtualHead(h, top); v != nil {
				return v, top, nil
			}
		}
		if !probe {
			if !h.bad {
				return h, nil, nil
			}
			probe = true
			continue
		}
		nh, err := t.reconcile(ctx, p, encKey, h, top)
		if errors.Is(err, errHeadConflict) {
			if err := repairBackoff(ctx, attempt); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if top != nil && nh.Count > 0 && nh.Last == top.seq {
			return nh, top, nil
		}
		return nh, nil, nil
	}
	return nil, nil, fmt.Errorf("%w: index head of %s kept changing during repair", ErrConflict, encKey)
}

// repairBackoff waits before the repair attempt after attempt+1 lost
// compare-and-sets. A race with another writer or repairer is over after
// one loss (the re-read sees its head), so the first retry goes at once.
// Losing more means the head read was stale against the head the write
// checked: on a cluster, a leader being replaced can answer a read with
// what it held before the new leader's writes for as long as the election
// takes (seconds on a loaded machine; under load the 3-node bench lost
// 16 immediate attempts within 9 ms). So the waits grow to 250 ms, and the
// 16 attempts span at least 1 s before the read gives up with ErrConflict.
func repairBackoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	d := min(time.Millisecond<<min(attempt-1, 8), 250*time.Millisecond)
	return bus.Sleep(ctx, d/2+time.Duration(rand.Int64N(int64(d/2))))
}

// fetchState reads the head and (with probe) the session's newest message
// in one pipelined wave, without reconciling them. top is nil when the
// transcript is empty.
//
// On a replicated store a probing read asks the two leaders (still one
// wave): a follower's direct get can answer a moment behind an
// acknowledged write, and a head from a lagging index replica next to a
// current stream replica looked like a head left behind by a dead writer,
// whose repair then lost its compare-and-set to the real head on every
// attempt ("kept changing during repair"). Without the probe (an append's
// first, optimistic read) the head's direct get stands: the append's
// compare-and-set on the stream catches a stale head, and the retry probes.
func (t *Store) fetchState(ctx context.Context, p *pipe, encKey string, probe bool) (*head, *rawEntry, error) {
	subject := t.names.Transcript(encKey)
	var reqs []*nats.Msg
	fresh := probe && t.replicated
	if fresh {
		reqs = []*nats.Msg{t.kvLeaderReq(headKey(encKey)), bus.LeaderGetRequest(t.api, t.names.TranscriptsStream(), 0, subject)}
	} else {
		reqs = []*nats.Msg{t.kvLastReq(headKey(encKey))}
		if probe {
			reqs = append(reqs, t.lastForReq(subject))
		}
	}
	res, err := p.roundTrip(ctx, reqs)
	if err != nil {
		return nil, nil, err
	}
	if fresh {
		if err := leaderReplies([]string{t.kvName, t.names.TranscriptsStream()}, res); err != nil {
			return nil, nil, err
		}
	}
	h, err := decodeHeadMsg(res[0])
	if err != nil || !probe {
		return h, nil, err
	}
	last, found, err := parseEntryMsg(res[1])
	if err != nil || !found {
		return h, nil, err
	}
	return h, &last, nil
}
