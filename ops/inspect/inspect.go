// Package inspect reads a deployment's state for `sessionbus inspect`:
// its streams and buckets with their sizes, the consumers and their lag,
// runs that look stuck, children past their deadline, and the announces
// and notices not yet delivered. It only reads: a missing bucket is
// reported empty, never created.
package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/ops/search"
	"github.com/sessionbus/sessionbus/streams/deadletters"
)

// DeadLettersShown is how many of the newest dead letters a report lists
// (DeadLetterCount counts them all).
const DeadLettersShown = 50

// DefaultStuckAfter is how long a run may stay pending or running before
// inspect lists it as stuck: longer than any turn should take (a run's
// default timeout is 600 s) plus a gateway's ack wait.
const DefaultStuckAfter = 15 * time.Minute

// Options tune a report.
type Options struct {
	Names      bus.Names
	StuckAfter time.Duration // default DefaultStuckAfter
	Now        func() time.Time
}

// Report is what `sessionbus inspect --json` prints.
type Report struct {
	Streams          []Stream   `json:"streams"`
	Buckets          []Bucket   `json:"buckets"`
	Consumers        []Consumer `json:"consumers"`
	StuckRuns        []Run      `json:"stuckRuns"`
	ExpiredChildren  []Child    `json:"expiredChildren"`
	PendingAnnounces []Announce `json:"pendingAnnounces"`
	PendingNotices   []Notice   `json:"pendingNotices"`
	// DeadLetters are the newest deliveries channel adapters gave up on
	// (SB_DEADLETTER), oldest first; DeadLetterCount is how many it holds.
	DeadLetters     []deadletters.Entry `json:"deadLetters"`
	DeadLetterCount uint64              `json:"deadLetterCount"`
	// Archive is the archives' disk budget (session.maintenance.maxDiskBytes);
	// nil when the deployment has no archives store yet. Read leaves it
	// to the caller, which knows the configured budget.
	Archive *lifecycle.Budget `json:"archive,omitempty"`
	// Search is the transcript search index's freshness, as the indexer
	// that answered reports it; nil when no indexer answers.
	Search *search.Status `json:"search,omitempty"`
}

// HasStream reports whether the report lists a stream (KV buckets apart).
func (r *Report) HasStream(name string) bool {
	return slices.ContainsFunc(r.Streams, func(s Stream) bool { return s.Name == name })
}

// Stream is one stream that is not a KV bucket.
type Stream struct {
	Name      string `json:"name"`
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	FirstSeq  uint64 `json:"firstSeq"`
	LastSeq   uint64 `json:"lastSeq"`
	Replicas  int    `json:"replicas"`
	Consumers int    `json:"consumers"`
	MaxAge    string `json:"maxAge,omitempty"`
}

// Bucket is one KV bucket (the stream KV_<name>).
type Bucket struct {
	Name     string `json:"name"`
	Values   uint64 `json:"values"` // messages: every kept revision and delete marker
	Bytes    uint64 `json:"bytes"`
	History  int64  `json:"history"`
	TTL      string `json:"ttl,omitempty"`
	Replicas int    `json:"replicas"`
}

// Consumer is one consumer of a stream; Lag is what it has not been given
// yet (the server's NumPending).
type Consumer struct {
	Stream      string `json:"stream"`
	Name        string `json:"name"`
	Durable     bool   `json:"durable"`
	Lag         uint64 `json:"lag"`
	AckPending  int    `json:"ackPending"`
	Redelivered int    `json:"redelivered"`
	Waiting     int    `json:"waiting"`
}

// Run is a run record that has been pending or running too long.
type Run struct {
	RunID      string `json:"runId"`
	SessionKey string `json:"sessionKey"`
	Status     string `json:"status"`
	Gateway    string `json:"gateway,omitempty"`
	Attempts   int    `json:"attempts"`
	CreatedAt  int64  `json:"createdAt"`
	StartedAt  int64  `json:"startedAt,omitempty"`
	AgeSeconds int64  `json:"ageSeconds"` // since it started, else since it was created
}

// Child is a spawned child past its deadline with no outcome recorded.
type Child struct {
	ChildSessionKey     string `json:"childSessionKey"`
	RequesterSessionKey string `json:"requesterSessionKey"`
	RunID               string `json:"runId"`
	DeadlineAt          int64  `json:"deadlineAt"`
	OverdueSeconds      int64  `json:"overdueSeconds"`
}

// Announce is a child's completion announce not yet delivered.
type Announce struct {
	ChildSessionKey     string `json:"childSessionKey"`
	RequesterSessionKey string `json:"requesterSessionKey"`
	RunID               string `json:"runId"`
	State               string `json:"state"` // pending or queued
	Attempts            int    `json:"attempts"`
	Gateway             string `json:"gateway,omitempty"`
	Error               string `json:"error,omitempty"`
}

// Notice is a watch cursor whose notice awaits acknowledgement.
type Notice struct {
	Watcher          string `json:"watcher"`
	Target           string `json:"target"`
	LastSeenSequence uint64 `json:"lastSeenSequence"`
	NotifiedSequence uint64 `json:"notifiedSequence"`
	UpdatedAt        int64  `json:"updatedAt"`
}

// Read builds the report.
func Read(ctx context.Context, js jetstream.JetStream, o Options) (*Report, error) {
	if o.StuckAfter <= 0 {
		o.StuckAfter = DefaultStuckAfter
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Report{Streams: []Stream{}, Buckets: []Bucket{}, Consumers: []Consumer{}, StuckRuns: []Run{},
		ExpiredChildren: []Child{}, PendingAnnounces: []Announce{}, PendingNotices: []Notice{}, DeadLetters: []deadletters.Entry{}}
	if err := r.readStreams(ctx, js); err != nil {
		return nil, err
	}
	r.Search = searchStatus(ctx, js, o.Names)
	for _, st := range r.Streams {
		if st.Name == o.Names.DeadLetterStream() && st.Messages > 0 {
			r.DeadLetterCount = st.Messages
			dl, err := deadletters.Last(ctx, js, o.Names, DeadLettersShown)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", st.Name, err)
			}
			r.DeadLetters = append(r.DeadLetters, dl...)
		}
	}
	now := o.Now()
	if err := scan(ctx, js, o.Names.RunsBucket(), func(rec *runs.Record) {
		if rec.RunID == "" || rec.Terminal() { // not a run record, or finished
			return
		}
		since := rec.CreatedAt
		if rec.StartedAt > 0 {
			since = rec.StartedAt
		}
		if age := now.Sub(time.UnixMilli(since)); age >= o.StuckAfter {
			r.StuckRuns = append(r.StuckRuns, Run{RunID: rec.RunID, SessionKey: rec.SessionKey, Status: rec.Status,
				Gateway: rec.Gateway, Attempts: rec.Attempts, CreatedAt: rec.CreatedAt, StartedAt: rec.StartedAt, AgeSeconds: int64(age.Seconds())})
		}
	}); err != nil {
		return nil, err
	}
	if err := scan(ctx, js, o.Names.SubagentsBucket(), func(c *subagents.Record) {
		if c.ChildSessionKey == "" { // not a child's record
			return
		}
		if c.DeadlineAt > 0 && c.EndedAt == 0 && c.Outcome == "" && !c.Deleted && now.UnixMilli() > c.DeadlineAt {
			r.ExpiredChildren = append(r.ExpiredChildren, Child{ChildSessionKey: c.ChildSessionKey, RequesterSessionKey: c.RequesterSessionKey,
				RunID: c.RunID, DeadlineAt: c.DeadlineAt, OverdueSeconds: (now.UnixMilli() - c.DeadlineAt) / 1000})
		}
		if a := c.Announce; a != nil && (a.State == subagents.AnnouncePending || a.State == subagents.AnnounceQueued) {
			r.PendingAnnounces = append(r.PendingAnnounces, Announce{ChildSessionKey: c.ChildSessionKey, RequesterSessionKey: c.RequesterSessionKey,
				RunID: c.RunID, State: a.State, Attempts: a.Attempts, Gateway: a.Gateway, Error: a.Error})
		}
	}); err != nil {
		return nil, err
	}
	if err := scan(ctx, js, o.Names.WatchersBucket(), func(c *watchers.Cursor) {
		if c.Watcher != "" && c.Pending() {
			r.PendingNotices = append(r.PendingNotices, Notice{Watcher: c.Watcher, Target: c.Target,
				LastSeenSequence: c.LastSeenSequence, NotifiedSequence: c.NotifiedSequence, UpdatedAt: c.UpdatedAt})
		}
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(r.StuckRuns, func(a, b Run) int { return int(b.AgeSeconds - a.AgeSeconds) })
	slices.SortFunc(r.ExpiredChildren, func(a, b Child) int { return int(b.OverdueSeconds - a.OverdueSeconds) })
	slices.SortFunc(r.PendingAnnounces, func(a, b Announce) int { return strings.Compare(a.ChildSessionKey, b.ChildSessionKey) })
	slices.SortFunc(r.PendingNotices, func(a, b Notice) int {
		return strings.Compare(a.Watcher+"\x00"+a.Target, b.Watcher+"\x00"+b.Target)
	})
	return r, nil
}

// readStreams lists every stream of the account, the KV buckets apart,
// with the consumers of each.
func (r *Report) readStreams(ctx context.Context, js jetstream.JetStream) error {
	lister := js.ListStreams(ctx)
	for si := range lister.Info() {
		c, st := si.Config, si.State
		if name, ok := strings.CutPrefix(c.Name, "KV_"); ok {
			b := Bucket{Name: name, Values: st.Msgs, Bytes: st.Bytes, History: c.MaxMsgsPerSubject, Replicas: c.Replicas}
			if c.MaxAge > 0 {
				b.TTL = c.MaxAge.String()
			}
			r.Buckets = append(r.Buckets, b)
			continue
		}
		s := Stream{Name: c.Name, Messages: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq,
			Replicas: c.Replicas, Consumers: st.Consumers}
		if c.MaxAge > 0 {
			s.MaxAge = c.MaxAge.String()
		}
		r.Streams = append(r.Streams, s)
		if st.Consumers == 0 {
			continue
		}
		stream, err := js.Stream(ctx, c.Name)
		if err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				continue // deleted meanwhile
			}
			return fmt.Errorf("stream %s: %w", c.Name, err)
		}
		cl := stream.ListConsumers(ctx)
		for ci := range cl.Info() {
			r.Consumers = append(r.Consumers, Consumer{Stream: c.Name, Name: ci.Name, Durable: ci.Config.Durable != "",
				Lag: ci.NumPending, AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting})
		}
		if err := cl.Err(); err != nil {
			return fmt.Errorf("consumers of %s: %w", c.Name, err)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list streams: %w", err)
	}
	slices.SortFunc(r.Streams, func(a, b Stream) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(r.Buckets, func(a, b Bucket) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(r.Consumers, func(a, b Consumer) int {
		return strings.Compare(a.Stream+"\x00"+a.Name, b.Stream+"\x00"+b.Name)
	})
	return nil
}

// scan calls fn with every current value of bucket that decodes as T; a
// missing bucket has none.
func scan[T any](ctx context.Context, js jetstream.JetStream, bucket string, fn func(*T)) error {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bucket %s: %w", bucket, err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("read bucket %s: %w", bucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("read bucket %s: %w", bucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("read bucket %s: watch closed", bucket)
			}
			if e == nil {
				return nil // every current value was delivered
			}
			var v T
			if json.Unmarshal(e.Value(), &v) == nil {
				fn(&v)
			}
		}
	}
}

// searchStatus asks an indexer for the search index's freshness; nil when
// none answers (no indexer runs, or these credentials may not ask).
func searchStatus(ctx context.Context, js jetstream.JetStream, names bus.Names) *search.Status {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := search.Ask(ctx, js.Conn(), names, &search.Query{Status: true})
	if err != nil {
		return nil
	}
	return &res.Index
}
