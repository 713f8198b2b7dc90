package transcripts

// Load helpers and measured operations shared by the go benchmarks and the
// `sessionbus bench` command.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// BenchKey is the encoded session key LoadInterleaved uses for session i.
func BenchKey(i int) string { return "bench.s" + strconv.Itoa(i) }

// BenchPayload is a size-byte JSON entry.
func BenchPayload(size int) []byte {
	const pre, post = `{"role":"user","content":"`, `"}`
	if size < len(pre)+len(post) {
		size = len(pre) + len(post)
	}
	b := make([]byte, 0, size)
	b = append(b, pre...)
	for len(b) < size-len(post) {
		b = append(b, 'x')
	}
	return append(b, post...)
}

// LoadInterleaved writes perSession entries of size bytes to each of
// sessions sessions (keys BenchKey(0..sessions-1)), round-robin: one entry of
// every session, then the next round, which is the worst case for a
// subject scan. It returns the keys.
func LoadInterleaved(ctx context.Context, t *Store, sessions, perSession, size int) ([]string, error) {
	keys := make([]string, sessions)
	for i := range keys {
		keys[i] = BenchKey(i)
	}
	payload := BenchPayload(size)
	n, err := t.BulkLoad(ctx, func(yield func(string, []byte) bool) {
		for r := 0; r < perSession; r++ {
			for _, k := range keys {
				if !yield(k, payload) {
					return
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if want := uint64(sessions * perSession); n != want {
		return nil, fmt.Errorf("loaded %d entries, want %d", n, want)
	}
	return keys, nil
}

// LoadSingle writes n entries of size bytes to one session, as atomic
// batches of MaxBatch.
func LoadSingle(ctx context.Context, t *Store, encKey string, n, size int) error {
	payload := BenchPayload(size)
	got, err := t.BulkLoad(ctx, func(yield func(string, []byte) bool) {
		for i := 0; i < n; i++ {
			if !yield(encKey, payload) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if got != uint64(n) {
		return fmt.Errorf("loaded %d entries, want %d", got, n)
	}
	return nil
}

// Sequences returns the stream sequences of entries [from, to) of a session
// (from the index), e.g. to feed RawDirectGetter the very messages a Tail reads.
func (t *Store) Sequences(ctx context.Context, encKey string, from, to uint64) ([]uint64, error) {
	es, err := t.Read(ctx, encKey, from, to)
	if err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(es))
	for i, e := range es {
		seqs[i] = e.Seq
	}
	return seqs, nil
}

// RawDirectGetter is the raw_direct_get_50 baseline: direct gets by known
// sequence, pipelined (all requests sent, then all replies read) on one
// long-lived reply subscription, with no index and no checks.
type RawDirectGetter struct {
	p       *pipe
	subject string
}

// NewRawDirectGetter prepares direct gets on stream.
func NewRawDirectGetter(nc *nats.Conn, stream string) (*RawDirectGetter, error) {
	p, err := newPipe(nc, pipeChanCapacity, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &RawDirectGetter{p: p, subject: "$JS.API.DIRECT.GET." + stream}, nil
}

// Get fetches the messages at seqs and returns their total body size.
func (g *RawDirectGetter) Get(ctx context.Context, seqs []uint64) (int, error) {
	reqs := make([]*nats.Msg, len(seqs))
	for i, s := range seqs {
		reqs[i] = &nats.Msg{Subject: g.subject, Data: strconv.AppendUint(append(make([]byte, 0, 32), `{"seq":`...), s, 10)}
		reqs[i].Data = append(reqs[i].Data, '}')
	}
	res, err := g.p.roundTrip(ctx, reqs)
	if err != nil {
		return 0, err
	}
	n := 0
	for i, m := range res {
		if st := msgStatus(m); st != "" {
			return 0, fmt.Errorf("direct get seq %d: status %s", seqs[i], st)
		}
		n += len(m.Data)
	}
	return n, nil
}

// Close releases the subscription.
func (g *RawDirectGetter) Close() { g.p.close() }
