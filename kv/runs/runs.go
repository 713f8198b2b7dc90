// Package runs is the `runs` bucket: one record per run (its status, reply
// and transcript position), updated with compare-and-set, and waiting on a
// run's outcome through one bucket-wide watch per process.
package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
)

// Statuses of a Record.
const (
	Pending = "pending"
	Running = "running"
	OK      = "ok"
	Error   = "error"
	Timeout = "timeout"
	Killed  = "killed"
	// Aborted: stopped on request (/stop, `sessionbus session stop`, the
	// ops subject) while it ran; the partial reply stays in the transcript.
	Aborted = "aborted"
)

// DefaultMaxAge is how long a run record is kept after its last write when
// the config says nothing (bus.runRecordMaxAge): long past any run's
// timeout and any caller's wait, and long enough that an idempotent repeat
// of a send a day later still finds the first run.
const DefaultMaxAge = 7 * 24 * time.Hour

// Record is the state of one run, key = run id. Waiting on a run is a watch
// on its key.
type Record struct {
	RunID      string `json:"runId"`
	SessionKey string `json:"sessionKey"`
	AgentID    string `json:"agentId"`
	Status     string `json:"status"`
	Gateway    string `json:"gateway,omitempty"`
	Attempts   int    `json:"attempts,omitempty"`
	CreatedAt  int64  `json:"createdAt"`
	StartedAt  int64  `json:"startedAt,omitempty"`
	EndedAt    int64  `json:"endedAt,omitempty"`
	Error      string `json:"error,omitempty"`
	Reply      string `json:"reply,omitempty"`
	ChainID    string `json:"chainId,omitempty"`
	Hop        int    `json:"hop,omitempty"`
	// TranscriptAt is the session's transcript length when the run first
	// started: the run writes its prompt and reply at that position and the
	// next (it holds the session lane meanwhile), so a redelivered attempt
	// finds what an earlier one wrote by position, however much was
	// appended after.
	TranscriptAt *uint64 `json:"transcriptAt,omitempty"`
	// TurnDeadline is when the running attempt's turn is over by its
	// timeout (Unix ms; 0: not recorded). Its prompt keeps the session's
	// other runs out while the run is running; a running record long past
	// it is an attempt whose gateway died and whose request is gone, and
	// holds the session no more.
	TurnDeadline int64 `json:"turnDeadline,omitempty"`
	// IdempotencyKey is the caller's key when the run came from
	// sessions_send with one; the run id is derived from it.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Inbox holds the human messages that came for the run after it was
	// queued (queue modes, docs/inbound.md): messages steered into its
	// running turn, which its gateway reads at each boundary, and, for a
	// collect run, the batch its prompt is made of. Workers append to it
	// with a compare-and-set while the run has not ended (a collect
	// batch: while it waits), so a message is either the run's or, once
	// the run ended, a turn of its own.
	Inbox []InboxMessage `json:"inbox,omitempty"`
	// Collect marks a run whose prompt is its Inbox batch, gathered while
	// the session was busy; InboxDropped and InboxSummary are what a full
	// batch dropped (messages.queue.drop).
	Collect      bool     `json:"collect,omitempty"`
	InboxDropped int      `json:"inboxDropped,omitempty"`
	InboxSummary []string `json:"inboxSummary,omitempty"`
	// QuietMs is a collect run's quiet window (messages.queue.debounceMs):
	// it starts no sooner than this long after its newest message.
	QuietMs int64 `json:"quietMs,omitempty"`
}

// InboxMessage is one message of a Record's Inbox.
type InboxMessage struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	At   int64  `json:"at"`             // unix ms, when the worker took it
	Mode string `json:"mode,omitempty"` // its queue mode (config.Queue*)
	// Followup is the run request that runs the message as a turn of its
	// own when the running turn ends without it (or keeps it: a
	// steer-backlog), as the worker built it.
	Followup json.RawMessage `json:"followup,omitempty"`
}

// Terminal reports whether the run has finished.
func (r *Record) Terminal() bool {
	switch r.Status {
	case OK, Error, Timeout, Killed, Aborted:
		return true
	}
	return false
}

// ErrExists is returned by Create for a run id already recorded.
var ErrExists = errors.New("run already exists")

// Records is the runs bucket.
type Records struct {
	bus.KVConfig // recreated by bus.Guard, then the watch restarts
	b            record.Bucket[Record]
	// restart asks the watch to start over on a recreated bucket.
	restart chan struct{}

	watchOnce sync.Once
	watchErr  error
	watchDone chan struct{}
	stopWatch context.CancelFunc
	wmu       sync.Mutex
	waiters   map[string][]chan *Record
	closed    bool
}

// ErrClosed is returned by Watch and Wait after Close.
var ErrClosed = errors.New("run records closed")

// Option configures Open (bus.StoreOption).
type Option = bus.StoreOption

// WithReplicas sets the replica count of a new bucket.
var WithReplicas = bus.WithReplicas

// WithMaxAge sets how long a record outlives its last write, the bucket's
// TTL (bus.runRecordMaxAge; 0 or unset: DefaultMaxAge).
var WithMaxAge = bus.WithMaxAge

// Open creates the runs bucket if absent; an existing bucket keeps its
// settings.
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Records, error) {
	kv, opened, err := bus.OpenBucket(ctx, js, bus.Bucket{
		Name: names.RunsBucket(), Description: "sessionbus run records", Ages: true, Age: DefaultMaxAge,
	}, opts...)
	if err != nil {
		return nil, err
	}
	return &Records{KVConfig: opened, b: record.New[Record](kv, js, "run"), restart: make(chan struct{}, 1)}, nil
}

// Recreate creates the bucket again after it was deleted and restarts the
// watch on it, so waiters keep waiting (the gateway running their run
// records its outcome in the new bucket) instead of hanging on a watch of
// a stream that is gone (see bus.Guard).
func (r *Records) Recreate(ctx context.Context, deleted string) error {
	if err := r.KVConfig.Recreate(ctx, deleted); err != nil {
		return err
	}
	select {
	case r.restart <- struct{}{}:
	default:
	}
	return nil
}

// KV is the runs bucket.
func (r *Records) KV() jetstream.KeyValue { return r.b.KV() }

// Create writes rec unless its run id has a record: ErrExists then.
func (r *Records) Create(ctx context.Context, rec *Record) error {
	if _, err := r.b.Create(ctx, rec.RunID, rec); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return ErrExists
		}
		return fmt.Errorf("create run record %s: %w", rec.RunID, err)
	}
	return nil
}

// CreateAsync puts the Create of rec on the connection without waiting: a
// submitter pipelines it ahead of the run request it publishes next.
func (r *Records) CreateAsync(rec *Record) (jetstream.PubAckFuture, error) {
	f, err := r.b.CreateAsync(rec.RunID, rec)
	if err != nil {
		return nil, fmt.Errorf("create run record %s: %w", rec.RunID, err)
	}
	return f, nil
}

// RecordPending writes rec (status pending) unless the run has a record
// already: what a caller that queued without one writes when it stops
// waiting before a gateway took the run.
func (r *Records) RecordPending(ctx context.Context, rec *Record) error {
	if err := r.Create(ctx, rec); err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("record pending run %s: %w", rec.RunID, err)
	}
	return nil
}

// Get returns a run record and its revision (jetstream.ErrKeyNotFound when
// the run has none).
func (r *Records) Get(ctx context.Context, runID string) (*Record, uint64, error) {
	return r.b.Get(ctx, runID)
}

// Update applies fn with compare-and-set, retrying on a concurrent write.
func (r *Records) Update(ctx context.Context, runID string, fn func(*Record) error) (*Record, error) {
	rec, _, err := r.b.Update(ctx, runID, nil, 0, fn)
	return rec, err
}

// UpdateFrom is Update starting from a record the caller already read at
// revision rev, which saves the read when nobody wrote meanwhile (a run's
// gateway is normally its record's only writer). It returns the new revision.
func (r *Records) UpdateFrom(ctx context.Context, runID string, cur *Record, rev uint64, fn func(*Record) error) (*Record, uint64, error) {
	return r.b.Update(ctx, runID, cur, rev, fn)
}

// UpdateAsync is UpdateFrom whose first write is on the connection when it
// returns, ahead of anything the caller publishes next: a gateway records a
// run's transcript position and then appends its prompt without waiting in
// between, and the server, reading the connection in order, never stores
// the prompt without having received the record first.
func (r *Records) UpdateAsync(ctx context.Context, runID string, cur *Record, rev uint64, fn func(*Record) error) (wait func() (*Record, uint64, error), err error) {
	return r.b.UpdateAsync(ctx, runID, cur, rev, fn)
}

// Wait blocks until the run is terminal or ctx ends, and returns the last
// record seen (ctx's error on timeout). One bucket-wide watch per Records
// serves every waiter: a watch per call would cost a consumer create and
// delete, several round trips, on every send.
func (r *Records) Wait(ctx context.Context, runID string) (*Record, error) {
	w, err := r.Watch(runID)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	// registered first, read second: a change between the two still arrives
	rec, _, err := r.Get(ctx, runID)
	if err == nil && rec.Terminal() {
		return rec, nil
	}
	return w.wait(ctx, rec)
}

// Waiter receives the terminal record of one run. Registered before the
// run is submitted, it needs no read of the record at all.
type Waiter struct {
	r  *Records
	id string
	ch chan *Record
}

// Watch registers interest in runID's outcome; Stop releases it.
func (r *Records) Watch(runID string) (*Waiter, error) {
	if err := r.startWatch(); err != nil {
		return nil, err
	}
	w := &Waiter{r: r, id: runID, ch: make(chan *Record, 1)}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	// appended past the end of what deliver may be reading: safe
	r.waiters[runID] = append(r.waiters[runID], w.ch)
	return w, nil
}

// Wait blocks until the run is terminal or ctx ends. Use it only for a run
// submitted after Watch; otherwise Records.Wait.
func (w *Waiter) Wait(ctx context.Context) (*Record, error) { return w.wait(ctx, nil) }

func (w *Waiter) wait(ctx context.Context, rec *Record) (*Record, error) {
	select {
	case done := <-w.ch:
		return done, nil
	case <-ctx.Done():
		if cur, _, gerr := w.r.Get(context.WithoutCancel(ctx), w.id); gerr == nil {
			if cur.Terminal() {
				return cur, nil
			}
			rec = cur
		}
		return rec, ctx.Err()
	case <-w.r.watchDone:
		return rec, errors.New("run watch stopped")
	}
}

// C delivers the run's terminal record, for a select that must not read
// the record when it gives up (Wait reads it once on ctx's end).
func (w *Waiter) C() <-chan *Record { return w.ch }

// Stop unregisters the waiter.
func (w *Waiter) Stop() { w.r.unwait(w.id, w.ch) }

func (r *Records) startWatch() error {
	r.watchOnce.Do(func() {
		r.waiters = map[string][]chan *Record{}
		r.watchDone = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		r.stopWatch = cancel
		w, err := r.KV().WatchAll(ctx, jetstream.UpdatesOnly())
		if err != nil {
			r.watchErr = fmt.Errorf("watch runs bucket: %w", err)
			cancel()
			close(r.watchDone)
			return
		}
		go r.dispatch(ctx, w)
	})
	return r.watchErr
}

func (r *Records) dispatch(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(r.watchDone)
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.restart:
			_ = w.Stop()
			nw, err := r.KV().WatchAll(ctx, jetstream.UpdatesOnly())
			if err != nil {
				// the bucket is gone again or the server is down: the next
				// Recreate tries once more; waiters time out meanwhile
				continue
			}
			w = nw
		case e, ok := <-w.Updates():
			if !ok {
				select { // ended by a restart or by Close
				case <-ctx.Done():
					return
				case <-r.restart:
					if nw, err := r.KV().WatchAll(ctx, jetstream.UpdatesOnly()); err == nil {
						w = nw
					}
				}
				continue
			}
			r.deliver(e)
		}
	}
}

// deliver hands a terminal record to the run's waiters.
func (r *Records) deliver(e jetstream.KeyValueEntry) {
	if e == nil || e.Operation() != jetstream.KeyValuePut {
		return
	}
	r.wmu.Lock()
	chs := r.waiters[e.Key()]
	r.wmu.Unlock()
	if len(chs) == 0 {
		return
	}
	rec, err := r.b.Decode(e.Value())
	if err != nil || !rec.Terminal() {
		return
	}
	for _, ch := range chs {
		select {
		case ch <- rec:
		default:
		}
	}
}

func (r *Records) unwait(runID string, ch chan *Record) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	// a new slice, never an edit in place: deliver reads the slice it took
	// under the lock after letting go of it
	chs := slices.DeleteFunc(slices.Clone(r.waiters[runID]), func(c chan *Record) bool { return c == ch })
	if len(chs) == 0 {
		delete(r.waiters, runID)
	} else {
		r.waiters[runID] = chs
	}
}

// Close stops the shared watch; waiters still blocked get an error.
func (r *Records) Close() {
	r.wmu.Lock()
	r.closed = true
	r.wmu.Unlock()
	r.watchOnce.Do(func() { r.watchErr = ErrClosed; r.watchDone = make(chan struct{}); close(r.watchDone) })
	if r.stopWatch != nil {
		r.stopWatch()
		<-r.watchDone
	}
}
