// Package search is the transcript search: an indexer follows
// SB_TRANSCRIPTS into a SQLite FTS5 index of the text sessions_history
// shows (redacted the same way), drops what deleted and reset sessions
// leave, and answers <prefix>.ops.search for ops and admin. Each indexer
// holds a full replica; several share the requests in one queue group.
package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/rules/sanitize"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// DefaultBatch is the most entries one index transaction applies: large
// enough that a rebuild is not bound by commits, small enough that a
// search waits little for the writer.
const DefaultBatch = 2000

// DefaultRefresh is how often the indexer reads the stream's last
// sequence for the lag it reports when no entry arrives.
const DefaultRefresh = 2 * time.Second

// Options configure an indexer.
type Options struct {
	NC    *nats.Conn
	JS    jetstream.JetStream
	Names bus.Names
	// Path is the index file; a missing file is rebuilt from the stream.
	Path string
	// Rebuild removes the index file first: a rebuild on demand.
	Rebuild bool
	// WithTools indexes tool results too (their text, redacted).
	WithTools bool
	Redactor  *sanitize.Redactor // nil: sanitize.DefaultRedactor()
	Alias     rules.Alias        // session.mainKey and scope, for the kind filter
	Log       *slog.Logger
	Batch     int           // 0: DefaultBatch
	Refresh   time.Duration // 0: DefaultRefresh
	// BeforeCommit, when set, is called with each batch before it is
	// committed; an error abandons the batch and stops the indexer, as a
	// crash would (tests).
	BeforeCommit func(rows int) error
	// Observe, when set, is told for each entry indexed how long after
	// the stream stored it its batch committed (the bench's index_lag).
	Observe func(time.Duration)
}

// States of an indexer.
const (
	StateRebuilding = "rebuilding"
	StateReady      = "ready"
	StateStopped    = "stopped"
)

// Status is an indexer's freshness, carried by every answer.
type Status struct {
	State   string `json:"state"`
	Applied uint64 `json:"applied"` // last stream sequence indexed
	Last    uint64 `json:"last"`    // last stream sequence known
	Lag     uint64 `json:"lag"`     // Last - Applied
	// Target and Percent, while rebuilding: the stream's last sequence
	// when the rebuild started, and how far it is.
	Target  uint64 `json:"target,omitempty"`
	Percent int    `json:"percent,omitempty"`
	Entries int64  `json:"entries"` // entries indexed by this process
	Error   string `json:"error,omitempty"`
}

// Indexer follows the transcript stream into an Index.
type Indexer struct {
	o      Options
	ix     *Index
	stream jetstream.Stream
	log    *slog.Logger

	applied, last, target atomic.Uint64
	// caught is a last sequence the index was found caught up to with
	// nothing left to deliver (the entries after applied were purged).
	caught   atomic.Uint64
	entries  atomic.Int64
	complete atomic.Bool
	// watched: the sessions bucket's state at start is applied (what was
	// deleted while no indexer ran is gone), so answers may be given.
	watched atomic.Bool
	errMu   sync.Mutex
	err     error

	// the writer's own state (the writer goroutine only)
	sess   map[uint64]sessMark // by keyMark
	floors map[string]uint64

	msgs   chan read
	events chan jetstream.KeyValueEntry
	// nothingLeft tells the writer a rebuild found no entry left to
	// apply (the rest of the stream was purged).
	nothingLeft chan struct{}
	watchedCh   chan struct{} // closed once watched is true
	failed      chan struct{} // closed by fail
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	closeOnce   sync.Once
	iter        jetstream.MessagesContext
	watch       jetstream.KeyWatcher

	// archived search (archived.go): one sync at a time
	archMu   sync.Mutex
	archives *archives.Store
}

// Start opens (or rebuilds) the index and follows the stream and the
// sessions bucket until Close.
func Start(ctx context.Context, o Options) (*Indexer, error) {
	if o.Redactor == nil {
		o.Redactor = sanitize.DefaultRedactor()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	stream, err := o.JS.Stream(ctx, o.Names.TranscriptsStream())
	if err != nil {
		return nil, fmt.Errorf("search: transcript stream %s: %w (start `sessionbus serve` or a worker first)", o.Names.TranscriptsStream(), err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("search: transcript stream: %w", err)
	}
	ix, err := openFor(o, info)
	if err != nil {
		return nil, err
	}
	in := &Indexer{o: o, ix: ix, stream: stream, log: o.Log.With("component", "search"),
		msgs: make(chan read, 4*o.Batch), events: make(chan jetstream.KeyValueEntry, 1024),
		nothingLeft: make(chan struct{}, 1), watchedCh: make(chan struct{}), failed: make(chan struct{})}
	if err := in.load(info.State.LastSeq); err != nil {
		ix.Close()
		return nil, err
	}
	if err := in.follow(ctx); err != nil {
		ix.Close()
		return nil, err
	}
	// A replica starting from its file answers only once what was deleted
	// while it was down has left it, so it can join the queue group at
	// once without serving a deleted session's text.
	select {
	case <-in.watchedCh:
	case <-in.failed:
		err := in.Err()
		in.Close()
		return nil, fmt.Errorf("search: %w", err)
	case <-ctx.Done():
		in.Close()
		return nil, fmt.Errorf("search: load the sessions' state: %w", ctx.Err())
	}
	return in, nil
}

// openFor opens the index file, starting over when asked to or when the
// stream was recreated since the index was built from it (another
// creation time, or a last sequence below what the index applied): the
// sequences name other entries now.
func openFor(o Options, info *jetstream.StreamInfo) (*Index, error) {
	if o.Rebuild {
		if err := removeIndex(o.Path); err != nil {
			return nil, err
		}
	}
	ix, err := OpenIndex(o.Path)
	if err != nil {
		return nil, err
	}
	created := strconv.FormatInt(info.Created.UnixNano(), 10)
	applied, err := ix.Applied()
	var was string
	if err == nil {
		was, err = ix.meta("stream")
	}
	if err != nil {
		ix.Close()
		return nil, err
	}
	if (was == "" || was == created) && applied <= info.State.LastSeq {
		if was == "" {
			err = ix.setMeta("stream", created)
		}
		return ix, err
	}
	o.Log.Warn("search: the transcript stream was recreated; rebuilding the index", "applied", applied, "streamLast", info.State.LastSeq)
	ix.Close()
	if err := removeIndex(o.Path); err != nil {
		return nil, err
	}
	if ix, err = OpenIndex(o.Path); err != nil {
		return nil, err
	}
	return ix, ix.setMeta("stream", created)
}

func removeIndex(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("search: remove index %s: %w", p, err)
		}
	}
	return nil
}

// load reads the index's state into the indexer.
func (in *Indexer) load(streamLast uint64) error {
	applied, err := in.ix.Applied()
	if err != nil {
		return err
	}
	complete, err := in.ix.Complete()
	if err != nil {
		return err
	}
	in.sess = map[uint64]sessMark{}
	if err := in.ix.EachSession(func(s Session) { in.sess[keyMark(s.Key)] = markOf(s) }); err != nil {
		return err
	}
	if in.floors, err = in.ix.Floors(); err != nil {
		return err
	}
	in.applied.Store(applied)
	in.last.Store(streamLast)
	in.target.Store(streamLast)
	if !complete && applied >= streamLast {
		// nothing to catch up on: the index is complete at once
		if err := in.ix.Apply(context.Background(), &Batch{Complete: true}); err != nil {
			return err
		}
		complete = true
	}
	in.complete.Store(complete)
	if !complete {
		in.log.Info("search: building the index from the stream", "from", applied+1, "to", streamLast, "file", in.ix.Path())
	}
	return nil
}

// follow starts the stream consumer, the sessions watch, the writer and
// the refresher.
func (in *Indexer) follow(ctx context.Context) error {
	// An ordered consumer from the sequence after the last one applied:
	// the position that counts is the one committed with the rows, in the
	// index file, so no server-side consumer state can disagree with it.
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{in.o.Names.Transcript(">")}}
	if a := in.applied.Load(); a > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, a+1
	}
	cons, err := in.o.JS.OrderedConsumer(ctx, in.o.Names.TranscriptsStream(), cfg)
	if err != nil {
		return fmt.Errorf("search: consume %s: %w", in.o.Names.TranscriptsStream(), err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(in.o.Batch))
	if err != nil {
		return fmt.Errorf("search: consume %s: %w", in.o.Names.TranscriptsStream(), err)
	}
	ss, err := sessions.Open(ctx, in.o.JS, in.o.Names) // created when absent, as a worker does
	if err != nil {
		it.Stop()
		return fmt.Errorf("search: sessions bucket: %w", err)
	}
	// the watch lives as long as the indexer, not the start's context
	run, cancel := context.WithCancel(context.Background())
	w, err := ss.KV().WatchAll(run)
	if err != nil {
		cancel()
		it.Stop()
		return fmt.Errorf("search: watch sessions: %w", err)
	}
	in.iter, in.watch = it, w
	in.cancel = cancel
	in.wg.Add(4)
	go in.pump(run)
	go in.pumpEvents(run)
	go in.write(run)
	go in.refresh(run)
	return nil
}

// pump moves the stream's messages to the writer.
func (in *Indexer) pump(ctx context.Context) {
	defer in.wg.Done()
	for {
		m, err := in.iter.Next()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				in.fail(fmt.Errorf("read the transcript stream: %w", err))
			}
			return
		}
		rd, ok := in.read(m)
		if !ok {
			continue
		}
		select {
		case in.msgs <- rd:
		case <-ctx.Done():
			return
		}
	}
}

// pumpEvents moves the sessions bucket's changes to the writer.
func (in *Indexer) pumpEvents(ctx context.Context) {
	defer in.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-in.watch.Updates():
			if !ok {
				return
			}
			select {
			case in.events <- e:
			case <-ctx.Done():
				return
			}
		}
	}
}

// refresh keeps the stream's last sequence current while no entry
// arrives, so the lag an answer reports is never older than Refresh.
func (in *Indexer) refresh(ctx context.Context) {
	defer in.wg.Done()
	t := time.NewTicker(in.o.Refresh)
	defer t.Stop()
	var logged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			in.check(ctx)
			// a rebuild says how far it is, every progressEvery
			if st := in.Status(); st.State == StateRebuilding && time.Since(logged) >= progressEvery {
				logged = time.Now()
				in.log.Info("search: rebuilding the index", "percent", st.Percent, "applied", st.Applied, "target", st.Target, "entries", st.Entries)
			}
		}
	}
}

// progressEvery is how often a rebuild logs its progress.
const progressEvery = 10 * time.Second

// check reads the stream's last sequence and, when the index is behind
// it, whether any entry is left to apply: none (the rest was purged)
// means the index is caught up to it.
func (in *Indexer) check(ctx context.Context) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := in.stream.Info(c)
	if err != nil {
		return
	}
	last, applied := info.State.LastSeq, in.applied.Load()
	in.seeLast(last)
	if applied >= last {
		return
	}
	_, err = in.stream.GetMsg(c, applied+1, jetstream.WithGetMsgSubject(in.o.Names.Transcript(">")))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		in.caught.Store(last)
		if !in.complete.Load() {
			select {
			case in.nothingLeft <- struct{}{}:
			default:
			}
		}
	}
}

func (in *Indexer) seeLast(seq uint64) {
	for {
		cur := in.last.Load()
		if seq <= cur || in.last.CompareAndSwap(cur, seq) {
			return
		}
	}
}

func (in *Indexer) fail(err error) {
	in.errMu.Lock()
	if in.err == nil {
		in.err = err
		close(in.failed)
		in.log.Error("search: indexer stopped", "err", err)
	}
	in.errMu.Unlock()
}

// Err is why the indexer stopped, nil while it runs.
func (in *Indexer) Err() error {
	in.errMu.Lock()
	defer in.errMu.Unlock()
	return in.err
}

// Status is the indexer's freshness now.
func (in *Indexer) Status() Status {
	s := Status{State: StateReady, Applied: in.applied.Load(), Last: in.last.Load(), Entries: in.entries.Load()}
	if done := max(s.Applied, in.caught.Load()); s.Last > done {
		s.Lag = s.Last - done
	}
	if !in.complete.Load() || !in.watched.Load() {
		s.State, s.Target = StateRebuilding, in.target.Load()
		if s.Target > 0 {
			s.Percent = int(min(s.Applied, s.Target) * 100 / s.Target)
		}
	}
	if err := in.Err(); err != nil {
		s.State, s.Error = StateStopped, err.Error()
	}
	return s
}

// Close stops following and closes the index; a batch not yet committed
// is abandoned (the next start applies it again).
func (in *Indexer) Close() { in.closeOnce.Do(in.close) }

func (in *Indexer) close() {
	if in.cancel != nil {
		in.cancel()
	}
	if in.iter != nil {
		in.iter.Stop()
	}
	if in.watch != nil {
		_ = in.watch.Stop()
	}
	in.wg.Wait()
	_ = in.ix.Close()
}

// Index is the indexer's index (reads).
func (in *Indexer) Index() *Index { return in.ix }

// subjectKey is the session key of a transcript subject.
func (in *Indexer) subjectKey(subject string) (string, bool) {
	pre := in.o.Names.Transcript("")
	if len(subject) <= len(pre) || subject[:len(pre)] != pre {
		return "", false
	}
	k, err := bus.DecodeKey(subject[len(pre):])
	return k, err == nil
}

// read is one stream message as the pump made it ready for the writer:
// the text work (decode, sanitize, redact) is done beside the writer's
// SQLite work, not before it.
type read struct {
	seq, pending uint64
	row          Row
	ok           bool // row is text to index
}

// read prepares one message (ok false: not a stream message).
func (in *Indexer) read(m jetstream.Msg) (read, bool) {
	md, err := m.Metadata()
	if err != nil {
		return read{}, false
	}
	rd := read{seq: md.Sequence.Stream, pending: md.NumPending}
	key, ok := in.subjectKey(m.Subject())
	if !ok {
		return rd, true
	}
	who, text, ok := handlers.SearchText(in.o.Redactor, m.Data(), in.o.WithTools)
	if !ok {
		return rd, true
	}
	n, _ := strconv.ParseUint(m.Headers().Get(transcripts.HeaderEntry), 10, 64)
	rd.row = Row{Seq: rd.seq, Key: key, Agent: rules.AgentIDFromKey(key), N: n, Role: who, TS: md.Timestamp.UnixMilli(), Text: text, stored: md.Timestamp}
	rd.ok = true
	return rd, true
}
