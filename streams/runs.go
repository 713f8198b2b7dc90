package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Run statuses of a RunRecord.
const (
	RunPending = "pending"
	RunRunning = "running"
	RunOK      = "ok"
	RunError   = "error"
	RunTimeout = "timeout"
	RunKilled  = "killed"
)

// Headers every run request carries, so loops are visible to any gateway
// without decoding the body.
const (
	HeaderChainID = "Sb-Chain-Id"
	HeaderHop     = "Sb-Hop"
)

// GatewaysConsumer is the durable pull consumer every gateway replica shares.
const GatewaysConsumer = "gateways"

// Provenance marks a message that came from another session (reference §4.2).
type Provenance struct {
	Kind             string `json:"kind"` // external_user | inter_session | internal_system
	SourceSessionKey string `json:"sourceSessionKey,omitempty"`
	SourceChannel    string `json:"sourceChannel,omitempty"`
	SourceTool       string `json:"sourceTool,omitempty"`
}

// A2A asks the gateway to run the agent-to-agent flow (ping-pong turns, then
// the announce step) after the primary run; its progress lives in A2AState.
type A2A struct {
	RequesterKey      string `json:"requesterKey"`
	RequesterChannel  string `json:"requesterChannel,omitempty"`
	TargetDisplayKey  string `json:"targetDisplayKey"`
	OriginalMessage   string `json:"originalMessage"`
	MaxPingPongTurns  int    `json:"maxPingPongTurns"`
	AnnounceTimeoutMs int64  `json:"announceTimeoutMs"`
}

// RunRequest is the body of a message on <prefix>.runs.<agentId> in the
// work-queue stream: one agent turn to execute.
type RunRequest struct {
	RunID             string      `json:"runId"`
	SessionKey        string      `json:"sessionKey"` // store key of the session the turn runs in
	AgentID           string      `json:"agentId"`
	Message           string      `json:"message"` // body without provenance lines (what scripts match)
	Prompt            string      `json:"prompt"`  // the annotated prompt stored as the user message
	ExtraSystemPrompt string      `json:"extraSystemPrompt,omitempty"`
	Provenance        *Provenance `json:"provenance,omitempty"`
	Lane              string      `json:"lane,omitempty"`
	TimeoutSeconds    int         `json:"timeoutSeconds,omitempty"` // 0 = the gateway default
	ChainID           string      `json:"chainId"`
	Hop               int         `json:"hop"`
	A2A               *A2A        `json:"a2a,omitempty"`
	// Step names an A2A continuation ("pingpong:<n>", "announce"); empty for
	// an ordinary turn.
	Step      string `json:"step,omitempty"`
	ParentRun string `json:"parentRun,omitempty"` // the primary run of an A2A step
	CreatedAt int64  `json:"createdAt"`
	// Recorded says the submitter wrote a pending record before queueing.
	// A caller that waits for the outcome does not: the first gateway to
	// take the run creates its record (running), one write instead of two,
	// and the caller writes pending itself should it stop waiting first.
	Recorded bool `json:"recorded,omitempty"`
}

// RunRecord is the state of one run in the `runs` bucket, key = run id.
// Waiting on a run is a watch on its key.
type RunRecord struct {
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
	// IdempotencyKey is the caller's key when the run came from
	// sessions_send with one; the run id is derived from it.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Terminal reports whether the run has finished.
func (r *RunRecord) Terminal() bool {
	switch r.Status {
	case RunOK, RunError, RunTimeout, RunKilled:
		return true
	}
	return false
}

// Runs is the run protocol's storage: the work queue and the run records.
type Runs struct {
	js      jetstream.JetStream
	names   bus.Names
	stream  jetstream.Stream
	records jetstream.KeyValue

	watchOnce sync.Once
	watchErr  error
	watchDone chan struct{}
	stopWatch context.CancelFunc
	wmu       sync.Mutex
	waiters   map[string][]chan *RunRecord
}

// RunsDedupeWindow is how long a repeated run id (idempotency key) is
// recognised by the work queue itself; the run record catches it after.
const RunsDedupeWindow = 10 * time.Minute

// OpenRuns creates the SB_RUNS stream and the runs bucket if absent.
//
// SB_RUNS works as a work queue — one durable consumer shared by every
// gateway, each run delivered to one of them, redelivered until acked —
// but with limits retention: acked runs are purged in bulk below the
// consumer's ack floor (Trim), not one by one on each ack. A work-queue
// stream removes each message as it is acked, and when the queue is
// drained (a run at a time) every ack empties the stream's last block, so
// the server writes a tombstone and a new block file per run: measured at
// about a sixth of a sequential send's CPU. Unacked runs never expire. An
// SB_RUNS created by an earlier version as a work-queue stream keeps
// working as one (Trim then finds nothing to purge).
func OpenRuns(ctx context.Context, js jetstream.JetStream, names bus.Names, replicas int) (*Runs, error) {
	st, err := bus.EnsureStream(ctx, js, jetstream.StreamConfig{
		Name:        names.RunsStream(),
		Description: "sessionbus run requests; gateways pull, ack when the run is recorded finished",
		Subjects:    []string{names.Runs(">")},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		Duplicates:  RunsDedupeWindow,
	})
	if err != nil {
		return nil, err
	}
	kv, err := bus.EnsureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      names.Bucket("runs"),
		Description: "sessionbus run records",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, err
	}
	return &Runs{js: js, names: names, stream: st, records: kv}, nil
}

// Unfinished is the number of queued runs the gateways have not acked:
// waiting for a gateway or running. Before any gateway started, it is
// every run in the stream.
func (r *Runs) Unfinished(ctx context.Context) (uint64, error) {
	c, err := r.stream.Consumer(ctx, GatewaysConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		info, err := r.stream.Info(ctx)
		if err != nil {
			return 0, err
		}
		return info.State.Msgs, nil
	}
	if err != nil {
		return 0, err
	}
	info := c.CachedInfo()
	return info.NumPending + uint64(info.NumAckPending), nil
}

// Trim purges the runs every gateway is done with: those at or below the
// shared consumer's ack floor. Any gateway may call it at any time;
// concurrent calls purge the same prefix. It returns the messages purged.
func (r *Runs) Trim(ctx context.Context) (uint64, error) {
	c, err := r.stream.Consumer(ctx, GatewaysConsumer)
	if err != nil {
		return 0, fmt.Errorf("trim runs: %w", err)
	}
	floor := c.CachedInfo().AckFloor.Stream
	if floor == 0 {
		return 0, nil
	}
	info, err := r.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("trim runs: %w", err)
	}
	if info.State.Msgs == 0 || info.State.FirstSeq > floor {
		return 0, nil
	}
	before := info.State.Msgs
	if err := r.stream.Purge(ctx, jetstream.WithPurgeSequence(floor+1)); err != nil {
		return 0, fmt.Errorf("trim runs below %d: %w", floor+1, err)
	}
	after, err := r.stream.Info(ctx)
	if err != nil {
		return 0, nil
	}
	return before - min(before, after.State.Msgs), nil
}

// Stream is the run-request stream.
func (r *Runs) Stream() jetstream.Stream { return r.stream }

// Records is the runs bucket.
func (r *Runs) Records() jetstream.KeyValue { return r.records }

// Submit creates the pending record and queues the request (marked
// Recorded); the publish carries Nats-Msg-Id = run id, so a retried submit
// never queues twice.
//
// A run with an idempotency key is checked first: the record's Create is
// awaited before the publish, and ErrRunExists means a record with this id
// exists (an idempotent repeat). Any other run id is fresh, so the two
// writes are pipelined, record first on the same connection, in one round
// trip; should the record write fail, the run still goes ahead and the
// gateway that takes it writes the record.
func (r *Runs) Submit(ctx context.Context, req *RunRequest, rec *RunRecord) error {
	req.Recorded = true
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if rec.IdempotencyKey != "" {
		if _, err := r.records.Create(ctx, rec.RunID, data); err != nil {
			if errors.Is(err, jetstream.ErrKeyExists) {
				return ErrRunExists
			}
			return fmt.Errorf("create run record %s: %w", rec.RunID, err)
		}
		return r.Publish(ctx, req)
	}
	m := nats.NewMsg(r.recordSubject(rec.RunID))
	m.Data = data
	created, err := r.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(0))
	if err != nil {
		return fmt.Errorf("create run record %s: %w", rec.RunID, err)
	}
	if err := r.Publish(ctx, req); err != nil {
		return err
	}
	select {
	case <-created.Ok():
	case <-created.Err():
	case <-ctx.Done():
	}
	return nil
}

// RecordPending writes rec (status pending) unless the run has a record
// already: what a caller that queued without one writes when it stops
// waiting before a gateway took the run.
func (r *Runs) RecordPending(ctx context.Context, rec *RunRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := r.records.Create(ctx, rec.RunID, data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("record pending run %s: %w", rec.RunID, err)
	}
	return nil
}

func (r *Runs) recordSubject(runID string) string {
	return "$KV." + r.records.Bucket() + "." + runID
}

// Publish queues a run request (also used for A2A continuation steps,
// whose message id is runId + step).
func (r *Runs) Publish(ctx context.Context, req *RunRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(r.names.Runs(req.AgentID))
	msg.Data = body
	msg.Header.Set(HeaderChainID, req.ChainID)
	msg.Header.Set(HeaderHop, fmt.Sprint(req.Hop))
	id := req.RunID
	if req.Step != "" {
		id = req.ParentRun + ":" + req.Step
	}
	if _, err := r.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("queue run %s: %w", id, err)
	}
	return nil
}

// ErrRunExists is returned by Submit for a run id already recorded.
var ErrRunExists = errors.New("run already exists")

// Get returns a run record and its revision.
func (r *Runs) Get(ctx context.Context, runID string) (*RunRecord, uint64, error) {
	e, err := r.records.Get(ctx, runID)
	if err != nil {
		return nil, 0, err
	}
	var rec RunRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, 0, fmt.Errorf("run record %s: %w", runID, err)
	}
	return &rec, e.Revision(), nil
}

// Update applies fn with compare-and-set, retrying on a concurrent write.
func (r *Runs) Update(ctx context.Context, runID string, fn func(*RunRecord) error) (*RunRecord, error) {
	rec, _, err := r.UpdateFrom(ctx, runID, nil, 0, fn)
	return rec, err
}

// UpdateFrom is Update starting from a record the caller already read at
// revision rev, which saves the read when nobody wrote meanwhile (a run's
// gateway is normally its record's only writer). It returns the new revision.
func (r *Runs) UpdateFrom(ctx context.Context, runID string, cur *RunRecord, rev uint64, fn func(*RunRecord) error) (*RunRecord, uint64, error) {
	for attempt := 0; attempt < 32; attempt++ {
		if cur == nil {
			var err error
			if cur, rev, err = r.Get(ctx, runID); err != nil {
				return nil, 0, err
			}
		}
		next := *cur
		if err := fn(&next); err != nil {
			return nil, 0, err
		}
		data, err := json.Marshal(&next)
		if err != nil {
			return nil, 0, err
		}
		nrev, err := r.records.Update(ctx, runID, data, rev)
		if err == nil {
			return &next, nrev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, 0, err
		}
		cur = nil // someone wrote meanwhile: re-read
	}
	return nil, 0, fmt.Errorf("run %s: too many concurrent updates", runID)
}

// UpdateAsync is UpdateFrom whose first write is on the connection when it
// returns, ahead of anything the caller publishes next: a gateway records a
// run's transcript position and then appends its prompt without waiting in
// between, and the server, reading the connection in order, never stores
// the prompt without having received the record first. wait returns the
// outcome; a lost compare-and-set falls back to UpdateFrom (read, apply fn
// again, write).
func (r *Runs) UpdateAsync(ctx context.Context, runID string, cur *RunRecord, rev uint64, fn func(*RunRecord) error) (wait func() (*RunRecord, uint64, error), err error) {
	next := *cur
	if err := fn(&next); err != nil {
		return nil, err
	}
	data, err := json.Marshal(&next)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(r.recordSubject(runID))
	m.Data = data
	f, err := r.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		return nil, fmt.Errorf("update run %s: %w", runID, err)
	}
	return func() (*RunRecord, uint64, error) {
		select {
		case ack := <-f.Ok():
			return &next, ack.Sequence, nil
		case err := <-f.Err():
			if isWrongLastSeq(err) {
				return r.UpdateFrom(ctx, runID, nil, 0, fn)
			}
			return nil, 0, fmt.Errorf("update run %s: %w", runID, err)
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("update run %s: %w", runID, ctx.Err())
		}
	}, nil
}

// Wait blocks until the run is terminal or ctx ends, and returns the last
// record seen (ctx's error on timeout). One bucket-wide watch per Runs
// serves every waiter: a watch per call would cost a consumer create and
// delete, several round trips, on every send.
func (r *Runs) Wait(ctx context.Context, runID string) (*RunRecord, error) {
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

// RunWaiter receives the terminal record of one run. Registered before the
// run is submitted, it needs no read of the record at all.
type RunWaiter struct {
	r  *Runs
	id string
	ch chan *RunRecord
}

// Watch registers interest in runID's outcome; Stop releases it.
func (r *Runs) Watch(runID string) (*RunWaiter, error) {
	if err := r.startWatch(); err != nil {
		return nil, err
	}
	w := &RunWaiter{r: r, id: runID, ch: make(chan *RunRecord, 1)}
	r.wmu.Lock()
	r.waiters[runID] = append(r.waiters[runID], w.ch)
	r.wmu.Unlock()
	return w, nil
}

// Wait blocks until the run is terminal or ctx ends. Use it only for a run
// submitted after Watch; otherwise Runs.Wait.
func (w *RunWaiter) Wait(ctx context.Context) (*RunRecord, error) { return w.wait(ctx, nil) }

func (w *RunWaiter) wait(ctx context.Context, rec *RunRecord) (*RunRecord, error) {
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

// Stop unregisters the waiter.
func (w *RunWaiter) Stop() { w.r.unwait(w.id, w.ch) }

func (r *Runs) startWatch() error {
	r.watchOnce.Do(func() {
		r.waiters = map[string][]chan *RunRecord{}
		r.watchDone = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		r.stopWatch = cancel
		w, err := r.records.WatchAll(ctx, jetstream.UpdatesOnly())
		if err != nil {
			r.watchErr = fmt.Errorf("watch runs bucket: %w", err)
			cancel()
			close(r.watchDone)
			return
		}
		go r.dispatch(w)
	})
	return r.watchErr
}

func (r *Runs) dispatch(w jetstream.KeyWatcher) {
	defer close(r.watchDone)
	defer func() { _ = w.Stop() }()
	for e := range w.Updates() {
		if e == nil || e.Operation() != jetstream.KeyValuePut {
			continue
		}
		r.wmu.Lock()
		chs := r.waiters[e.Key()]
		r.wmu.Unlock()
		if len(chs) == 0 {
			continue
		}
		var rec RunRecord
		if json.Unmarshal(e.Value(), &rec) != nil || !rec.Terminal() {
			continue
		}
		for _, ch := range chs {
			select {
			case ch <- &rec:
			default:
			}
		}
	}
}

func (r *Runs) unwait(runID string, ch chan *RunRecord) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	chs := r.waiters[runID]
	for i, c := range chs {
		if c == ch {
			chs = append(chs[:i], chs[i+1:]...)
			break
		}
	}
	if len(chs) == 0 {
		delete(r.waiters, runID)
	} else {
		r.waiters[runID] = chs
	}
}

// Close stops the shared watch; waiters still blocked get an error.
func (r *Runs) Close() {
	r.watchOnce.Do(func() { r.watchDone = make(chan struct{}); close(r.watchDone) })
	if r.stopWatch != nil {
		r.stopWatch()
		<-r.watchDone
	}
}
