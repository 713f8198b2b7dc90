package transcripts

// Transcripts: one message per transcript entry in stream SB_TRANSCRIPTS on
// subject <prefix>.tr.<encKey>, body = the entry bytes, headers
//
//	Sb-Entry: <n>      0-based entry number within the session
//	Sb-Prev:  <seq>    on the first message of each append (single message or
//	                   atomic batch): stream seq of entry n-1, 0 if none.
//	                   Omitted on the other messages of an atomic batch, whose
//	                   previous entry is at seq-1 (batches commit contiguously).
//
// Every append is a compare-and-set on the session's subject
// (Nats-Expected-Last-Subject-Sequence = seq of the current last entry), so
// concurrent writers never interleave inside an append; the loser repairs its
// view of the index and retries. The entry→sequence index lives in KV (see
// transcript_index.go). Reads never scan by subject: they look the sequences
// up in the index and fetch the messages with pipelined direct gets, so a
// page costs O(limit) whatever the transcript's length or other sessions'
// traffic.

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// MaxBatch is the largest atomic batch (the server's default max_msgs per batch).
const MaxBatch = 1000

const (
	maxAppendAttempts = 64
	maxPooledPipes    = 32
	maxKeyLen         = 900
)

// Store reads and appends session transcripts. It is safe for
// concurrent use. Close releases its reply subscriptions.
type Store struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	names bus.Names
	opts  options

	trStream jetstream.Stream // SB_TRANSCRIPTS
	kv       jetstream.KeyValue
	kvStream jetstream.Stream // KV_trindex

	api        string // "$JS.API."
	dgStream   string // "$JS.API.DIRECT.GET.SB_TRANSCRIPTS"
	dgKV       string // "$JS.API.DIRECT.GET.KV_trindex."
	kvPre      string // "$KV.trindex."
	kvName     string // "KV_trindex"
	replicated bool   // either stream has replicas: reads that must be current go to the leaders

	mu     sync.Mutex
	pipes  []*pipe
	closed bool

	// gen counts the recreations of SB_TRANSCRIPTS this store went
	// through: a sequence names the same immutable message only within
	// one generation (see Generation).
	gen atomic.Uint64
}

// Generation is how many times this store recreated SB_TRANSCRIPTS after
// an operator deleted it. An entry's stream sequence names the same bytes
// for as long as the generation stays the same, so a caller may keep what
// it made of an entry under (generation, sequence) and skip fetching it
// again (TailCached). The count moves when this process's guard recreates
// the stream: within bus.DeletionGrace of the server's advisory, or at
// the guard's next check (bus.CheckEvery) if the advisory was missed.
func (t *Store) Generation() uint64 { return t.gen.Load() }

// Entry is one transcript entry.
type Entry struct {
	N    uint64    // entry number in the session, from 0
	Seq  uint64    // stream sequence in SB_TRANSCRIPTS
	Data []byte    // the entry bytes as appended
	Time time.Time // when the stream stored it
}

// Open creates the stream and the index bucket if they are absent
// (idempotent) and returns a handle.
func Open(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, names bus.Names, opt ...Option) (*Store, error) {
	o := defaultOptions()
	for _, f := range opt {
		f(&o)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 4*o.timeout)
		defer cancel()
	}
	st, err := ensureTranscriptStream(ctx, js, names, o.replicas)
	if err != nil {
		return nil, err
	}
	kv, kvs, err := ensureIndexBucket(ctx, js, names, o.replicas)
	if err != nil {
		return nil, err
	}
	api := apiPrefix(js)
	bucket := names.TranscriptIndexBucket()
	t := &Store{
		nc: nc, js: js, names: names, opts: o,
		trStream: st, kv: kv, kvStream: kvs,
		api:        api,
		dgStream:   api + "DIRECT.GET." + names.TranscriptsStream(),
		dgKV:       api + "DIRECT.GET.KV_" + bucket + ".",
		kvPre:      "$KV." + bucket + ".",
		kvName:     "KV_" + bucket,
		replicated: st.CachedInfo().Config.Replicas > 1 || kvs.CachedInfo().Config.Replicas > 1,
	}
	return t, nil
}

func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		if strings.HasSuffix(o.APIPrefix, ".") {
			return o.APIPrefix
		}
		return o.APIPrefix + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}

// Close releases the pooled reply subscriptions. Calls after Close fail with ErrClosed.
func (t *Store) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, p := range t.pipes {
		p.close()
	}
	t.pipes = nil
}

// StreamName is the transcript stream (SB_TRANSCRIPTS).
func (t *Store) StreamName() string { return t.names.TranscriptsStream() }

// Subject is the subject holding one session's entries.
func (t *Store) Subject(encKey string) string { return t.names.Transcript(encKey) }

func (t *Store) getPipe() (*pipe, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(t.pipes); n > 0 {
		p := t.pipes[n-1]
		t.pipes = t.pipes[:n-1]
		t.mu.Unlock()
		return p, nil
	}
	t.mu.Unlock()
	return newPipe(t.nc, pipeChanCapacity, t.opts.timeout)
}

func (t *Store) putPipe(p *pipe) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.broken || t.closed || len(t.pipes) >= maxPooledPipes {
		p.close()
		return
	}
	t.pipes = append(t.pipes, p)
}

// begin validates the key, applies the default timeout and takes a pipe.
func (t *Store) begin(ctx context.Context, encKey string) (context.Context, context.CancelFunc, *pipe, error) {
	if err := ValidateKey(encKey); err != nil {
		return nil, nil, nil, err
	}
	// Without a deadline in ctx, each wave of requests gets t.opts.timeout
	// (see pipe), so a long Append or Read is not cut off as a whole.
	ctx, cancel := context.WithCancel(ctx)
	p, err := t.getPipe()
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, p, nil
}

// ValidateKey checks an encoded session key: non-empty, at most 900 bytes,
// only [-/_=.a-zA-Z0-9], no leading, trailing or double dot. (These are the
// KV key rules, and they also exclude subject wildcards.)
func ValidateKey(encKey string) error {
	if encKey == "" || len(encKey) > maxKeyLen {
		return fmt.Errorf("%w: length %d (want 1..%d)", ErrInvalidKey, len(encKey), maxKeyLen)
	}
	if encKey[0] == '.' || encKey[len(encKey)-1] == '.' || strings.Contains(encKey, "..") {
		return fmt.Errorf("%w: %q has an empty token", ErrInvalidKey, encKey)
	}
	for i := 0; i < len(encKey); i++ {
		c := encKey[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '/' || c == '_' || c == '=' || c == '.') {
			return fmt.Errorf("%w: %q has byte %q at %d", ErrInvalidKey, encKey, c, i)
		}
	}
	return nil
}

// request builders

func (t *Store) seqReq(seq uint64) *nats.Msg {
	b := make([]byte, 0, 32)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, '}')
	return &nats.Msg{Subject: t.dgStream, Data: b}
}

func (t *Store) lastForReq(subject string) *nats.Msg {
	return &nats.Msg{Subject: t.dgStream + "." + subject}
}

func (t *Store) kvLastReq(key string) *nats.Msg {
	return &nats.Msg{Subject: t.dgKV + t.kvPre + key}
}

// kvLeaderReq asks the index bucket's leader for key's last value, in place
// of kvLastReq's direct get (answer through leaderReplies).
func (t *Store) kvLeaderReq(key string) *nats.Msg {
	return bus.LeaderGetRequest(t.api, t.kvName, 0, t.kvPre+key)
}

type pubAck struct {
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Batch  string              `json:"batch,omitempty"`
	Count  uint64              `json:"count,omitempty"`
	Dup    bool                `json:"duplicate,omitempty"`
	Error  *jetstream.APIError `json:"error,omitempty"`
}

// parseAck decodes a JetStream publish ack; API errors come back as
// *jetstream.APIError (errors.Is against jetstream's sentinels works).
func parseAck(m *nats.Msg) (pubAck, error) {
	var a pubAck
	switch st := msgStatus(m); st {
	case "":
	case "503":
		return a, ErrUnavailable
	default:
		return a, fmt.Errorf("streams: publish: status %s %s", st, m.Header.Get("Description"))
	}
	if seq, ok := fastAckSeq(m.Data); ok {
		a.Seq = seq
		return a, nil
	}
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return a, fmt.Errorf("streams: bad publish ack %q: %w", m.Data, err)
	}
	if a.Error != nil {
		return a, a.Error
	}
	if a.Seq == 0 {
		return a, fmt.Errorf("streams: publish ack without sequence: %q", m.Data)
	}
	return a, nil
}

// fastAckSeq parses the common ack {"stream":"X","seq":N} without reflection.
// Anything else (errors, batch acks, duplicates, domains) takes the JSON path.
func fastAckSeq(b []byte) (uint64, bool) {
	const pre = `{"stream":"`
	if len(b) < len(pre)+10 || string(b[:len(pre)]) != pre {
		return 0, false
	}
	i := len(pre)
	for i < len(b) && b[i] != '"' && b[i] != '\\' {
		i++
	}
	const mid = `","seq":`
	if i+len(mid) >= len(b) || string(b[i:i+len(mid)]) != mid {
		return 0, false
	}
	i += len(mid)
	var v uint64
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		v = v*10 + uint64(b[i]-'0')
		i++
	}
	if i == start || i+1 != len(b) || b[i] != '}' || v == 0 || i-start > 19 {
		return 0, false
	}
	return v, true
}

// leaderGet reads one message of the transcript stream from its leader
// (see bus.LeaderGetRequest): by sequence (seq > 0) or the newest on
// lastBySubj. Used on a replicated stream where a follower's view could
// mislead: a 404 for a sequence the index names, or a probe that is behind
// the head read before it.
func (t *Store) leaderGet(ctx context.Context, seq uint64, lastBySubj string) (rawEntry, bool, error) {
	if !t.replicated {
		return rawEntry{}, false, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.opts.timeout)
		defer cancel()
	}
	stream := t.names.TranscriptsStream()
	m, err := t.nc.RequestMsgWithContext(ctx, bus.LeaderGetRequest(t.api, stream, seq, lastBySubj))
	if errors.Is(err, nats.ErrNoResponders) {
		return rawEntry{}, false, ErrUnavailable
	}
	if err != nil {
		return rawEntry{}, false, err
	}
	if m, err = bus.LeaderGetReply(stream, m); err != nil {
		return rawEntry{}, false, leaderErr(stream, err)
	}
	return parseEntryMsg(m)
}

// leaderErr is the error of a leader read: ErrUnavailable when the stream
// has no leader (JetStream answers 503 while one is elected).
func leaderErr(stream string, err error) error {
	var ae *jetstream.APIError
	if errors.As(err, &ae) && ae.Code == 503 {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, stream, err)
	}
	return fmt.Errorf("streams: read from the leader of %s: %w", stream, err)
}

// leaderReplies turns the replies to requests built by leaderReqs into
// direct-get replies.
func leaderReplies(streams []string, res []*nats.Msg) error {
	for i, m := range res {
		r, err := bus.LeaderGetReply(streams[i], m)
		if err != nil {
			return leaderErr(streams[i], err)
		}
		res[i] = r
	}
	return nil
}

// Append adds entries to the session's transcript and returns the entry
// number of the first. One entry is one publish; more are atomic batches of
// at most MaxBatch entries, each stored entirely or not at all. Entries of
// one batch are contiguous in the transcript; when more than MaxBatch
// entries are given, a concurrent writer may land between two batches.
// If a later batch fails, earlier batches stay written and the error says so.
func (t *Store) Append(ctx context.Context, encKey string, entries ...[]byte) (uint64, error) {
	return t.appendEntries(ctx, encKey, false, 0, entries)
}

// AppendIfLen appends entries only if the transcript holds exactly want
// entries, as one writer that must not interleave with another: when the
// transcript is longer (a concurrent writer got there first) it fails with
// an error matching ErrConflict and writes nothing of that batch, where
// Append would retry after the other writer's entries. An importer uses it
// so two runs of the same import cannot both append the same lines.
func (t *Store) AppendIfLen(ctx context.Context, encKey string, want uint64, entries ...[]byte) (uint64, error) {
	return t.appendEntries(ctx, encKey, true, want, entries)
}

func (t *Store) appendEntries(ctx context.Context, encKey string, exact bool, want uint64, entries [][]byte) (uint64, error) {
	if len(entries) == 0 {
		return 0, ErrEmptyEntry
	}
	for i, e := range entries {
		if len(e) == 0 {
			return 0, fmt.Errorf("%w: entry %d of %d", ErrEmptyEntry, i, len(entries))
		}
		if len(e) > t.opts.maxEntryBytes {
			return 0, fmt.Errorf("%w: entry %d is %d bytes, limit %d", ErrEntryTooLarge, i, len(e), t.opts.maxEntryBytes)
		}
	}
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return 0, err
	}
	defer cancel()
	defer t.putPipe(p)

	h, _, err := t.loadState(ctx, p, encKey, false)
	if err != nil {
		return 0, err
	}
	if exact && h.Count != want {
		return 0, fmt.Errorf("%w: %s has %d entries, not %d", ErrConflict, encKey, h.Count, want)
	}
	// After the first CAS failure the next attempt publishes right after the
	// probed newest message (top) and leaves the index catch-up for after the
	// publish, which keeps the window a concurrent writer can steal short.
	var top *rawEntry
	haveTop := false
	var firstN uint64
	for off := 0; off < len(entries); off += MaxBatch {
		batch := entries[off:min(off+MaxBatch, len(entries))]
		var seqs []uint64
		for attempt := 0; ; attempt++ {
			n, prev := h.Count, h.Last
			if haveTop {
				n, prev = 0, 0
				if top != nil {
					n, prev = top.n+1, top.seq
				}
			}
			seqs, err = t.publishEntries(ctx, p, encKey, n, prev, batch)
			if err == nil {
				if off == 0 {
					firstN = n
				}
				break
			}
			if !bus.IsWrongLastSeq(err) {
				return firstN, t.partial(err, encKey, off, len(entries))
			}
			if exact {
				// Someone else appended (or the index lagged): the caller
				// re-reads and decides; a blind retry could double.
				return firstN, t.partial(fmt.Errorf("%w: %s changed while appending", ErrConflict, encKey), encKey, off, len(entries))
			}
			if attempt+1 >= maxAppendAttempts {
				return firstN, t.partial(fmt.Errorf("%w (session %s, %d attempts)", ErrConflict, encKey, attempt+1), encKey, off, len(entries))
			}
			if err := backoff(ctx, attempt); err != nil {
				return firstN, t.partial(err, encKey, off, len(entries))
			}
			if h, top, err = t.fetchState(ctx, p, encKey, true); err != nil {
				return firstN, t.partial(err, encKey, off, len(entries))
			}
			haveTop = true
		}
		if !haveTop && !h.bad {
			// Published right after the head's last entry: that is top.
			top = nil
			if h.Count > 0 {
				top = &rawEntry{n: h.Count - 1, seq: h.Last}
			}
		}
		nh, err := t.indexAppend(ctx, p, encKey, h, top, seqs)
		if err != nil {
			// The entries are stored; only the index lags, and the next reader
			// or writer repairs it. Report success for what is in the stream.
			if off+len(batch) == len(entries) {
				return firstN, nil
			}
			return firstN, t.partial(err, encKey, off+len(batch), len(entries))
		}
		h, top, haveTop = nh, nil, false
	}
	return firstN, nil
}

func (t *Store) partial(err error, encKey string, done, total int) error {
	if done == 0 {
		return fmt.Errorf("append to %s: %w", encKey, err)
	}
	return fmt.Errorf("append to %s: %d of %d entries written, then: %w", encKey, done, total, err)
}

// backoff waits a random time below 20 µs << attempt, capped at 20 ms: a
// cap under one append's own time (several ms on a loaded 2-core machine
// under -race) let one of four writers lose all 64 attempts.
func backoff(ctx context.Context, attempt int) error {
	return sleep(ctx, time.Duration(rand.Int64N(int64(20*time.Microsecond)<<min(attempt, 10))))
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// publishEntries appends one batch (≤ MaxBatch) as entries n... after the
// entry at stream seq prev, with a
// compare-and-set on the subject and returns the entries' stream sequences.
func (t *Store) publishEntries(ctx context.Context, p *pipe, encKey string, n, prev uint64, batch [][]byte) ([]uint64, error) {
	subject := t.names.Transcript(encKey)
	msgs := buildEntryMsgs(subject, n, prev, batch, newBatchID)
	last := msgs[len(msgs)-1]
	for _, m := range msgs[:len(msgs)-1] {
		if err := t.nc.PublishMsg(m); err != nil {
			p.broken = true
			return nil, err
		}
	}
	res, err := p.roundTrip(ctx, []*nats.Msg{last})
	if err != nil {
		return nil, err
	}
	ack, err := parseAck(res[0])
	if err != nil {
		return nil, err
	}
	k := uint64(len(batch))
	if k > 1 && ack.Count != k {
		return nil, fmt.Errorf("streams: atomic batch of %d committed %d messages", k, ack.Count)
	}
	if ack.Seq < k {
		return nil, fmt.Errorf("streams: batch ack seq %d for %d messages", ack.Seq, k)
	}
	seqs := make([]uint64, k)
	for i := range seqs {
		seqs[i] = ack.Seq - k + 1 + uint64(i)
	}
	return seqs, nil
}

// buildEntryMsgs builds the messages of one append of entries n, n+1, ...
// whose previous entry is at stream seq prev. One entry: a plain CAS publish.
// More: an ADR-50 atomic batch (Nats-Batch-Id/-Sequence, Nats-Batch-Commit on
// the last), with the CAS header and Sb-Prev on the first message only.
func buildEntryMsgs(subject string, n, prev uint64, batch [][]byte, batchID func() string) []*nats.Msg {
	msgs := make([]*nats.Msg, len(batch))
	prevS := strconv.FormatUint(prev, 10)
	var id string
	if len(batch) > 1 {
		id = batchID()
	}
	for i, data := range batch {
		h := make(nats.Header, 6)
		h[hdrEntry] = []string{strconv.FormatUint(n+uint64(i), 10)}
		if i == 0 {
			h[hdrPrev] = []string{prevS}
			h[jetstream.ExpectedLastSubjSeqHeader] = []string{prevS}
		}
		if id != "" {
			h["Nats-Batch-Id"] = []string{id}
			h["Nats-Batch-Sequence"] = []string{strconv.Itoa(i + 1)}
			if i == len(batch)-1 {
				h["Nats-Batch-Commit"] = []string{"1"}
			}
		}
		msgs[i] = &nats.Msg{Subject: subject, Header: h, Data: data}
	}
	return msgs
}

func newBatchID() string {
	var b [8]byte
	_, _ = cryptorand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Count is the number of entries in the session's transcript (repairing a
// lagging index first).
func (t *Store) Count(ctx context.Context, encKey string) (uint64, error) {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return 0, err
	}
	defer cancel()
	defer t.putPipe(p)
	h, _, err := t.loadState(ctx, p, encKey, true)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", encKey, err)
	}
	return h.Count, nil
}

// Read returns entries [from, to), clamped to the transcript's length.
func (t *Store) Read(ctx context.Context, encKey string, from, to uint64) ([]Entry, error) {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer t.putPipe(p)
	h, newest, err := t.loadState(ctx, p, encKey, true)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", encKey, err)
	}
	to = min(to, h.Count)
	if from >= to {
		return nil, nil
	}
	es, err := t.fetch(ctx, p, encKey, h, from, to, newest, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s [%d,%d): %w", encKey, from, to, err)
	}
	return es, nil
}

// Tail returns the newest limit entries after skipping the offset newest
// ones, oldest first, and the transcript's length. offset 0 is the tail;
// an offset at or past the length gives no entries.
func (t *Store) Tail(ctx context.Context, encKey string, limit int, offset uint64) ([]Entry, uint64, error) {
	return t.TailCached(ctx, encKey, limit, offset, nil)
}

// TailCached is Tail for a caller that keeps what it made of entries it
// read before: entries for which cached(seq, n) is true are not fetched
// and come back with their N and Seq but no Data (nor Time). The index
// still decides which entries the page holds; only the direct gets of
// known, immutable messages are skipped (within one Generation). nil
// cached fetches everything.
func (t *Store) TailCached(ctx context.Context, encKey string, limit int, offset uint64, cached func(seq, n uint64) bool) ([]Entry, uint64, error) {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return nil, 0, err
	}
	defer cancel()
	defer t.putPipe(p)
	h, newest, err := t.loadState(ctx, p, encKey, true)
	if err != nil {
		return nil, 0, fmt.Errorf("tail %s: %w", encKey, err)
	}
	total := h.Count
	if limit <= 0 || offset >= total {
		return nil, total, nil
	}
	to := total - offset
	from := to - min(uint64(limit), to)
	es, err := t.fetch(ctx, p, encKey, h, from, to, newest, cached)
	if err != nil {
		return nil, total, fmt.Errorf("tail %s [%d,%d): %w", encKey, from, to, err)
	}
	return es, total, nil
}

// fetch reads entries [from, to) (to ≤ h.Count): the sequences come from the
// head and the sealed chunks the range spans (one pipelined wave), the
// messages from pipelined direct gets by sequence (a second wave). newest,
// when set, is entry h.Count-1 already fetched by the probe. Entries for
// which cached(seq, n) is true are not fetched (no Data).
func (t *Store) fetch(ctx context.Context, p *pipe, encKey string, h *head, from, to uint64, newest *rawEntry, cached func(seq, n uint64) bool) ([]Entry, error) {
	seqs, err := t.lookup(ctx, p, encKey, h, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(seqs))
	var reqs []*nats.Msg
	var want []int // the indices of seqs fetched, in request order
	for i, seq := range seqs {
		n := from + uint64(i)
		out[i] = Entry{N: n, Seq: seq}
		switch {
		case newest != nil && to == h.Count && i == len(seqs)-1 && newest.seq == seq:
			if err := t.check(encKey, *newest, n, seq); err != nil {
				return nil, err
			}
			out[i] = Entry{N: newest.n, Seq: newest.seq, Data: newest.data, Time: newest.time}
		case cached != nil && cached(seq, n):
		default:
			reqs = append(reqs, t.seqReq(seq))
			want = append(want, i)
		}
	}
	if len(reqs) == 0 {
		return out, nil
	}
	res, err := p.roundTrip(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for j, i := range want {
		e, found, err := parseEntryMsg(res[j])
		if err != nil {
			return nil, err
		}
		if !found {
			if e, found, err = t.leaderGet(ctx, seqs[i], ""); err != nil {
				return nil, err
			}
			if !found {
				return nil, fmt.Errorf("%w: session %s entry %d (seq %d)", ErrEntryMissing, encKey, from+uint64(i), seqs[i])
			}
		}
		if err := t.check(encKey, e, from+uint64(i), seqs[i]); err != nil {
			return nil, err
		}
		out[i] = Entry{N: e.n, Seq: e.seq, Data: e.data, Time: e.time}
	}
	return out, nil
}

// check verifies that the message fetched for entry n of encKey, by the
// index's sequence seq, is that entry.
func (t *Store) check(encKey string, e rawEntry, n, seq uint64) error {
	if subject := t.names.Transcript(encKey); e.subject != subject || e.n != n || e.seq != seq {
		return fmt.Errorf("%w: session %s entry %d: index says seq %d, which holds %s entry %d", ErrIndexCorrupt, encKey, n, seq, e.subject, e.n)
	}
	return nil
}

// lookup returns the stream sequences of entries [from, to).
func (t *Store) lookup(ctx context.Context, p *pipe, encKey string, h *head, from, to uint64) ([]uint64, error) {
	seqs := make([]uint64, 0, to-from)
	sealedEnd := h.Count - uint64(len(h.Tail)) // entries below come from chunks
	if from < sealedEnd {
		k0, k1 := from/ChunkSize, (min(to, sealedEnd)-1)/ChunkSize
		// A chunk is written before the head that points past it, but a
		// follower may not have it yet (or still hold the chunk of a
		// transcript deleted since): on a replicated bucket the leader,
		// which has every acknowledged write, answers.
		reqs := make([]*nats.Msg, 0, k1-k0+1)
		var streams []string
		for k := k0; k <= k1; k++ {
			if t.replicated {
				reqs = append(reqs, t.kvLeaderReq(chunkKey(encKey, k)))
				streams = append(streams, t.kvName)
			} else {
				reqs = append(reqs, t.kvLastReq(chunkKey(encKey, k)))
			}
		}
		res, err := p.roundTrip(ctx, reqs)
		if err != nil {
			return nil, err
		}
		if t.replicated {
			if err := leaderReplies(streams, res); err != nil {
				return nil, err
			}
		}
		for i, m := range res {
			k := k0 + uint64(i)
			switch st := msgStatus(m); st {
			case "":
			case "404":
				return nil, fmt.Errorf("%w: index chunk %s is missing (head says %d entries)", ErrIndexCorrupt, chunkKey(encKey, k), h.Count)
			case "503":
				return nil, ErrUnavailable
			default:
				return nil, fmt.Errorf("streams: index chunk get: status %s %s", st, m.Header.Get("Description"))
			}
			chunk, err := decodeChunk(m.Data)
			if err != nil {
				return nil, fmt.Errorf("%w: index chunk %s: %v", ErrIndexCorrupt, chunkKey(encKey, k), err)
			}
			lo, hi := k*ChunkSize, k*ChunkSize+ChunkSize
			seqs = append(seqs, chunk[max(from, lo)-lo:min(to, hi)-lo]...)
		}
	}
	if to > sealedEnd {
		seqs = append(seqs, h.Tail[max(from, sealedEnd)-sealedEnd:to-sealedEnd]...)
	}
	return seqs, nil
}

// Delete removes the session's transcript and its index: the subject is
// purged first, then the head, then the chunks, so an interrupted Delete
// leaves a head ahead of the stream, which the next reader or writer detects
// and resets.
func (t *Store) Delete(ctx context.Context, encKey string) error {
	ctx, cancel, p, err := t.begin(ctx, encKey)
	if err != nil {
		return err
	}
	defer cancel()
	defer t.putPipe(p)
	if err := t.trStream.Purge(ctx, jetstream.WithPurgeSubject(t.names.Transcript(encKey))); err != nil {
		return fmt.Errorf("delete %s: purge transcript: %w", encKey, err)
	}
	if err := t.kvStream.Purge(ctx, jetstream.WithPurgeSubject(t.kvPre+headKey(encKey))); err != nil {
		return fmt.Errorf("delete %s: purge index head: %w", encKey, err)
	}
	// c.<key>.* matches exactly this session's chunks: a session whose key
	// extends this one (<key>.x) has chunk keys with more tokens.
	if err := t.kvStream.Purge(ctx, jetstream.WithPurgeSubject(t.kvPre+"c."+encKey+".*")); err != nil {
		return fmt.Errorf("delete %s: purge index chunks: %w", encKey, err)
	}
	return nil
}
