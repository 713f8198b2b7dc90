package transcripts

import (
	"context"
	"fmt"
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

	hints countHints // transcripts' last lengths, for tailPrefetched

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
