package signals

// How the log stays exact with retention left to the stream itself.
//
// SB_SIGNALS has MaxAge 30 d and MaxMsgs 50,000 (DiscardOld): the server
// prunes, oldest first, and records nothing about what it pruned per
// session. So every event carries, in its Sb-Back header, the sequences of
// up to BackLinks previous events of the same session, newest first
// (Sb-Back[0] is its predecessor). Appends to one session are serialized by
// the stream itself: the publish expects the subject's last sequence
// (Nats-Expected-Last-Subject-Sequence) that the appender read, so the
// predecessor it names is the true one, and a racing appender retries.
//
// From that chain, with pruning oldest-first:
//   - the oldest retained event F of a session (one indexed lookup: the
//     server's per-subject index gives the first message of a subject without
//     walking other sessions' messages) names in Sb-Back[0] the newest pruned
//     event: the pruned watermark, exact, read from the stream rather than
//     guessed from sequence arithmetic;
//   - the events after a version are collected by walking back from the
//     newest event (last-for-subject) through Sb-Back, one direct get per
//     BackLinks events, then fetched by known sequence; never a subject scan
//     through the other sessions' messages in between.
//
// The head record (bucket `sigheads`, key = encoded session key) keeps
// {lastSequence, prunedMaxSequence}; it is only ever raised. It is what makes
// stateVersion and the watermark survive the pruning of every event of a
// session: then lastSequence is the newest pruned event, which is the
// watermark. An append raises lastSequence after its publish; Since raises
// prunedMaxSequence when it reads a higher one from the chain.
//
// Limit (documented in docs/signals.md): if an appender dies between its
// publish and its head update, the head lags until the session's next append
// or read, which repairs it from the stream; only if the orphaned event is
// pruned before either happens does the watermark miss it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// Retention and limits of the log: the values of the OpenClaw constants
// named beside them.
const (
	DefaultMaxAge     = 30 * 24 * time.Hour // SESSION_STATE_RETENTION_MS
	DefaultMaxMsgs    = 50_000              // SESSION_STATE_MAX_ROWS
	DefaultDuplicates = 24 * time.Hour      // dedupe-key window; the occurredAt clamp is 24 h too
	MaxLimit          = 200                 // most events one Since returns
	BackLinks         = 32                  // previous sequences each event names
	occurredClamp     = 24 * time.Hour
	maxAppendAttempts = 32
	inProcessWait     = 50 * time.Millisecond // before retrying an event still being stored
	fetchParallel     = 32                    // direct gets in flight for one Since
)

const hdrBack = "Sb-Back"

// ErrInvalid is wrapped by Append for an event that cannot be stored.
var ErrInvalid = errors.New("invalid signal event")

// Option configures Open.
type Option func(*options)

type options struct {
	maxAge     time.Duration
	maxMsgs    int64
	replicas   int
	duplicates time.Duration
	log        *slog.Logger
	now        func() time.Time
}

// WithMaxAge sets the stream's MaxAge (default 30 days).
func WithMaxAge(d time.Duration) Option { return func(o *options) { o.maxAge = d } }

// WithMaxMsgs sets the stream's MaxMsgs (default 50,000).
func WithMaxMsgs(n int64) Option { return func(o *options) { o.maxMsgs = n } }

// WithReplicas sets the stream's and head bucket's replicas (default 1).
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// WithDuplicates sets the dedupe window of Nats-Msg-Id (default 24 h,
// capped by MaxAge).
func WithDuplicates(d time.Duration) Option { return func(o *options) { o.duplicates = d } }

// WithLogger sets where read and append failures are logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// withClock replaces time.Now (tests of the occurredAt clamp).
func withClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// head is the record in the heads bucket.
type head struct {
	LastSequence      uint64 `json:"lastSequence"`
	PrunedMaxSequence uint64 `json:"prunedMaxSequence"`
	AgentID           string `json:"agentId,omitempty"`
	UpdatedAt         int64  `json:"updatedAt"`
}

// Log is the signal log. Safe for concurrent use.
type Log struct {
	js    jetstream.JetStream
	names bus.Names
	st    jetstream.Stream
	heads record.Bucket[head]
	log   *slog.Logger
	now   func() time.Time
	// streamCfg and headsCfg are what Open created the two with (Recreate)
	streamCfg jetstream.StreamConfig
	headsCfg  bus.KVConfig
}

// Open creates SB_SIGNALS (retention by the stream: MaxAge, MaxMsgs,
// DiscardOld; dedupe window; direct gets) and the heads bucket if absent.
// Existing ones keep their settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Log, error) {
	o := options{maxAge: DefaultMaxAge, maxMsgs: DefaultMaxMsgs, replicas: 1, duplicates: DefaultDuplicates}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.maxAge <= 0 || o.maxMsgs <= 0 {
		return nil, fmt.Errorf("signal log: maxAge and maxMsgs must be positive (got %s, %d)", o.maxAge, o.maxMsgs)
	}
	streamCfg := jetstream.StreamConfig{
		Name:        names.SignalsStream(),
		Description: "sessionbus signal log: session state changes, metadata only",
		Subjects:    []string{names.Signal(">")},
		Storage:     jetstream.FileStorage,
		Replicas:    max(o.replicas, 1),
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      o.maxAge,
		MaxMsgs:     o.maxMsgs,
		Duplicates:  max(min(o.duplicates, o.maxAge), 100*time.Millisecond),
		AllowDirect: true,
	}
	st, _, err := bus.OpenStream(ctx, js, streamCfg)
	if err != nil {
		return nil, err
	}
	kv, headsCfg, err := bus.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      names.SignalHeadsBucket(),
		Description: "sessionbus signal-log heads: last sequence and pruned watermark per session",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(o.replicas, 1),
	})
	if err != nil {
		return nil, err
	}
	return &Log{js: js, names: names, st: st, heads: record.New[head](kv, js, "signal head"), log: o.log, now: o.now,
		streamCfg: streamCfg, headsCfg: headsCfg}, nil
}

// Stream is the SB_SIGNALS handle.
func (l *Log) Stream() jetstream.Stream { return l.st }

// Append records ev (best effort for the caller: log the error and go on,
// never fail the turn). It fills Sequence, clamps OccurredAt to
// [now-24h, now] (0 means now), folds Summary onto one line and publishes
// with Nats-Msg-Id = DedupeKey. A DedupeKey seen within the dedupe window
// returns the stored event and duplicate=true, and must create no notices.
func (l *Log) Append(ctx context.Context, ev Event) (Event, bool, error) {
	if strings.TrimSpace(ev.SessionKey) == "" || ev.Kind == "" {
		return Event{}, false, fmt.Errorf("%w: sessionKey and kind are required", ErrInvalid)
	}
	now := l.now().UnixMilli()
	lo := now - occurredClamp.Milliseconds()
	if ev.OccurredAt <= 0 || ev.OccurredAt > now {
		ev.OccurredAt = now
	} else if ev.OccurredAt < lo {
		ev.OccurredAt = lo
	}
	ev.Summary = oneLine(ev.Summary)
	ev.Sequence = 0
	body, err := bus.Marshal(ev)
	if err != nil {
		return Event{}, false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	enc := bus.EncodeKey(ev.SessionKey)
	subj := l.names.Signal(enc)
	for attempt := range maxAppendAttempts {
		if attempt > 0 {
			if err := appendBackoff(ctx, attempt); err != nil {
				return Event{}, false, err
			}
		}
		last, err := l.lastEvent(ctx, subj)
		if err != nil {
			return Event{}, false, err
		}
		var expect uint64
		var back []uint64
		if last != nil {
			expect = last.seq
			back = append([]uint64{last.seq}, last.back[:min(len(last.back), BackLinks-1)]...)
		} else if h, _, err := l.heads.Get(ctx, enc); err == nil && h.LastSequence > 0 {
			// Every earlier event is pruned: name the newest one anyway, so
			// this event's predecessor link still gives the watermark.
			back = []uint64{h.LastSequence}
		} else if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return Event{}, false, fmt.Errorf("signal log: read head of %s: %w", ev.SessionKey, err)
		}
		msg := nats.NewMsg(subj)
		msg.Data = body
		if len(back) > 0 {
			msg.Header.Set(hdrBack, formatBack(back))
		}
		popts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(expect)}
		if ev.DedupeKey != "" {
			popts = append(popts, jetstream.WithMsgID(ev.DedupeKey))
		}
		ack, err := l.js.PublishMsg(ctx, msg, popts...)
		if bus.IsWrongLastSeq(err) {
			continue // another append to this session won; chain after it
		}
		if bus.IsMsgIDInProcess(err) {
			// this very event is being stored (a retry around a leader
			// change): a later try gets its acknowledgement as a duplicate
			select {
			case <-ctx.Done():
				return Event{}, false, ctx.Err()
			case <-time.After(inProcessWait):
			}
			continue
		}
		if err != nil {
			return Event{}, false, fmt.Errorf("signal log: append %s to %s: %w", ev.Kind, ev.SessionKey, err)
		}
		if ack.Duplicate {
			orig, ok, err := l.get(ctx, ack.Sequence)
			if err != nil {
				return Event{}, true, err
			}
			if !ok { // the original is already pruned: all that is left is its sequence
				return Event{Sequence: ack.Sequence, DedupeKey: ev.DedupeKey, SessionKey: ev.SessionKey}, true, nil
			}
			return orig.ev, true, nil
		}
		ev.Sequence = ack.Sequence
		if err := l.raiseHead(ctx, enc, ev.AgentID, ack.Sequence, 0); err != nil {
			// The event is stored; the head catches up on the next append
			// or read of this session.
			l.log.Warn("signal log: head update failed", "sessionKey", ev.SessionKey, "sequence", ack.Sequence, "err", err)
		}
		return ev, false, nil
	}
	return Event{}, false, fmt.Errorf("signal log: append to %s: %w", ev.SessionKey, record.ErrContended)
}

// appendBackoff spreads appenders racing on one session (the same schedule as
// kv/record's compare-and-set loop: the first retry is immediate, then a
// random wait growing with the losses), so they stop colliding in lockstep.
func appendBackoff(ctx context.Context, attempt int) error {
	if attempt <= 1 {
		return ctx.Err()
	}
	return bus.Sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt-1, 10))*int64(200*time.Microsecond))))
}

// Since lists the session's retained events with sequence > after,
// ascending, at most limit (clamped to 1..MaxLimit), with truncated,
// earliestAvailableSequence and historyGap (= after < the pruned watermark).
// It advances no cursor. On a read error it logs and returns the error with
// OpenClaw's fallback: no events, historyGap false.
func (l *Log) Since(ctx context.Context, sessionKey string, after uint64, limit int) (Changes, error) {
	limit = min(max(limit, 1), MaxLimit)
	c, err := l.since(ctx, sessionKey, after, limit)
	if err != nil {
		l.log.Warn("signal log: changesSince failed", "sessionKey", sessionKey, "after", after, "err", err)
		return Changes{Events: []Event{}}, err
	}
	return c, nil
}

func (l *Log) since(ctx context.Context, sessionKey string, after uint64, limit int) (Changes, error) {
	enc := bus.EncodeKey(sessionKey)
	subj := l.names.Signal(enc)
	var h head
	hp, _, err := l.heads.Get(ctx, enc)
	switch {
	case err == nil:
		h = *hp
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return Changes{}, fmt.Errorf("read head: %w", err)
	}
	last, err := l.lastEvent(ctx, subj)
	if err != nil {
		return Changes{}, err
	}
	c := Changes{Events: []Event{}}
	if last == nil {
		// Nothing retained: every event up to the head is pruned.
		pruned := max(h.PrunedMaxSequence, h.LastSequence)
		if h.LastSequence > 0 {
			c.EarliestAvailableSequence = h.LastSequence + 1
		}
		c.HistoryGap = after < pruned
		l.raise(ctx, sessionKey, enc, h, 0, pruned)
		return c, nil
	}
	first, err := l.firstEvent(ctx, subj)
	if err != nil {
		return Changes{}, err
	}
	if first == nil { // pruned between the two reads: the oldest retained is the newest
		first = last
	}
	pruned := h.PrunedMaxSequence
	if len(first.back) > 0 {
		pruned = max(pruned, first.back[0])
	}
	c.EarliestAvailableSequence = first.seq

	// Collect the sequences after `after` (and retained: >= first.seq),
	// newest first, walking back through Sb-Back.
	floor := max(after, first.seq-1)
	var seqs []uint64
	known := map[uint64]*stored{last.seq: last}
	if last.seq > floor {
		seqs = append(seqs, last.seq)
		cur := last
		for {
			done := len(cur.back) < BackLinks
			for _, s := range cur.back {
				if s <= floor {
					done = true
					break
				}
				seqs = append(seqs, s)
			}
			if done {
				break
			}
			oldest := seqs[len(seqs)-1]
			ev, ok, err := l.get(ctx, oldest)
			if err != nil {
				return Changes{}, err
			}
			if !ok { // pruned while we walked: everything older is gone too
				break
			}
			known[oldest] = ev
			cur = ev
		}
	}
	// seqs is descending; the answer is the oldest `limit` that are present.
	asc := make([]uint64, len(seqs))
	for i, s := range seqs {
		asc[len(seqs)-1-i] = s
	}
	i := 0
	for i < len(asc) && len(c.Events) < limit {
		window := asc[i:min(len(asc), i+limit-len(c.Events))]
		got, err := l.getMany(ctx, window, known)
		if err != nil {
			return Changes{}, err
		}
		for j, s := range window {
			if got[j] == nil {
				// Gone since the walk (pruned under us, or deleted by hand):
				// the caller missed it, which is what historyGap says.
				pruned = max(pruned, s)
				continue
			}
			c.Events = append(c.Events, got[j].ev)
		}
		i += len(window)
	}
	c.Truncated = i < len(asc)
	c.HistoryGap = after < pruned
	l.raise(ctx, sessionKey, enc, h, last.seq, pruned)
	return c, nil
}

// raise repairs the head from what a read saw in the stream (a lagging
// lastSequence, a newly known watermark); failures are only logged.
func (l *Log) raise(ctx context.Context, sessionKey, enc string, h head, last, pruned uint64) {
	if last <= h.LastSequence && pruned <= h.PrunedMaxSequence {
		return
	}
	if err := l.raiseHead(ctx, enc, "", last, pruned); err != nil {
		l.log.Warn("signal log: head repair failed", "sessionKey", sessionKey, "err", err)
	}
}

// raiseHead raises the head's lastSequence and prunedMaxSequence to at least
// the given values (never lowers either), creating the record if absent.
func (l *Log) raiseHead(ctx context.Context, enc, agentID string, last, pruned uint64) error {
	fn := func(h *head) error {
		if h.LastSequence >= last && h.PrunedMaxSequence >= pruned {
			return record.ErrUnchanged
		}
		h.LastSequence = max(h.LastSequence, last)
		h.PrunedMaxSequence = max(h.PrunedMaxSequence, pruned)
		if agentID != "" {
			h.AgentID = agentID
		}
		h.UpdatedAt = l.now().UnixMilli()
		return nil
	}
	for range maxAppendAttempts {
		_, _, err := l.heads.Update(ctx, enc, nil, 0, fn)
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		var h head
		if fn(&h) != nil {
			return nil
		}
		_, err = l.heads.Create(ctx, enc, &h)
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		// created concurrently: update that one
	}
	return record.ErrContended
}

// Delete removes a deleted session's events and head (as in OpenClaw,
// deleting a session deletes its events, head and cursors; the cursors are
// watchers.Store's).
func (l *Log) Delete(ctx context.Context, sessionKey string) error {
	enc := bus.EncodeKey(sessionKey)
	if err := l.st.Purge(ctx, jetstream.WithPurgeSubject(l.names.Signal(enc))); err != nil {
		return fmt.Errorf("signal log: purge %s: %w", sessionKey, err)
	}
	if err := l.heads.KV().Delete(ctx, enc); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("signal log: delete head of %s: %w", sessionKey, err)
	}
	return nil
}

// stored is an event read back from the stream with its back links.
type stored struct {
	ev   Event
	seq  uint64
	back []uint64
}

func decode(m *jetstream.RawStreamMsg) (*stored, error) {
	var ev Event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		return nil, fmt.Errorf("signal log: corrupt event at sequence %d: %w", m.Sequence, err)
	}
	ev.Sequence = m.Sequence
	back, err := parseBack(m.Header.Get(hdrBack))
	if err != nil {
		return nil, fmt.Errorf("signal log: event %d: %w", m.Sequence, err)
	}
	return &stored{ev: ev, seq: m.Sequence, back: back}, nil
}

func notFound(err error) bool { return errors.Is(err, jetstream.ErrMsgNotFound) }

// lastEvent is the session's newest retained event (direct get last for
// subject), nil if none is retained.
func (l *Log) lastEvent(ctx context.Context, subj string) (*stored, error) {
	m, err := l.st.GetLastMsgForSubject(ctx, subj)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("signal log: last event on %s: %w", subj, err)
	}
	return decode(m)
}

// firstEvent is the session's oldest retained event. The server answers
// "first message of this subject" from its per-subject index (the subject's
// first block and first sequence there), without walking the messages of
// other sessions in between.
func (l *Log) firstEvent(ctx context.Context, subj string) (*stored, error) {
	m, err := l.st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("signal log: first event on %s: %w", subj, err)
	}
	return decode(m)
}

// get reads one event by sequence; ok=false when it is not retained.
func (l *Log) get(ctx context.Context, seq uint64) (*stored, bool, error) {
	m, err := l.st.GetMsg(ctx, seq)
	if notFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("signal log: event %d: %w", seq, err)
	}
	s, err := decode(m)
	if err != nil {
		return nil, false, err
	}
	return s, true, nil
}

// getMany reads events by known sequence, up to fetchParallel at a time;
// nil entries are not retained.
func (l *Log) getMany(ctx context.Context, seqs []uint64, known map[uint64]*stored) ([]*stored, error) {
	out := make([]*stored, len(seqs))
	errs := make([]error, len(seqs))
	sem := make(chan struct{}, fetchParallel)
	var wg sync.WaitGroup
	for i, s := range seqs {
		if ev, ok := known[s]; ok {
			out[i] = ev
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ev, _, err := l.get(ctx, s)
			out[i], errs[i] = ev, err
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func formatBack(back []uint64) string {
	b := make([]byte, 0, len(back)*8)
	for i, s := range back {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, s, 10)
	}
	return string(b)
}

func parseBack(h string) ([]uint64, error) {
	if h == "" {
		return nil, nil
	}
	parts := strings.Split(h, ",")
	out := make([]uint64, 0, len(parts))
	for _, p := range parts {
		s, err := strconv.ParseUint(p, 10, 64)
		if err != nil || s == 0 {
			return nil, fmt.Errorf("bad %s header %q", hdrBack, h)
		}
		out = append(out, s)
	}
	return out, nil
}
