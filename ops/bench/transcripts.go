package bench

import (
	"context"
	"fmt"

	"github.com/sessionbus/sessionbus/bus"
)

// messages are the transcript entries every load writes, cycled by entry
// number: realistic OpenClaw messages of about 256 B (user text, assistant
// content blocks with reasoning tags, inline code, a planted API key), so
// sessions_history's sanitizer and redactor do real work. None is a tool
// message, so a 50-entry page returns 50 messages.
var messages = func() [][]byte {
	src := []string{
		`{"role":"user","content":"Can you check why the nightly export failed on db-7? The log says \"connection reset by peer\" at 02:14 UTC and the retry never ran. Look at the cron entry and tell me what to change.","timestamp":1767225600000}`,
		`{"role":"assistant","content":[{"type":"text","text":"<think>Cron runs pg_dump without the retry wrapper.</think>The 02:00 job calls pg_dump directly, so a reset aborts it. Wrap it with retry.sh --attempts 3 and set the timeout to 30m."}],"timestamp":1767225604000}`,
		`{"role":"user","content":"Use the staging key for the test run: OPENAI_API_KEY=sk-proj-4fJ9x2LmQ8rT1vZ6 and keep the output in /tmp/export-test. Tell me the row counts per table when it finishes, please.","timestamp":1767225660000}`,
		`{"role":"assistant","content":[{"type":"text","text":"Done. Ran ` + "`retry.sh --attempts 3 pg_dump -Fc app`" + ` against staging: users 48,211 rows, orders 1,204,377, events 9,880,412. No resets this time; total 6m41s. Output is in /tmp/export-test."}],"timestamp":1767226100000}`,
		`{"role":"user","content":"Great. Now schedule it for 02:30 instead of 02:00 so it doesn't overlap with the vacuum job, and add an alert to #ops if it fails twice in a row. Thanks!","timestamp":1767226200000}`,
		`{"role":"assistant","content":[{"type":"text","text":"<thinking>Move the schedule, add the alert rule.</thinking>Updated: the export now runs at 30 2 * * * and a second consecutive failure posts to #ops. The vacuum job keeps its 02:00 slot."}],"timestamp":1767226230000}`,
		`{"role":"user","content":"One more thing: the export file names should include the date, like app-2026-01-01.dump, and old dumps older than 14 days should be removed from the bucket.","timestamp":1767226300000}`,
		`{"role":"assistant","content":"Added the date suffix (app-$(date +%F).dump) and a lifecycle rule that deletes objects older than 14 days under exports/. Both changes are in the ops repo, commit 3f2a9c1, ready for review.","timestamp":1767226340000}`,
	}
	out := make([][]byte, len(src))
	for i, s := range src {
		out[i] = []byte(s)
	}
	return out
}()

func avgMessageBytes() int {
	n := 0
	for _, m := range messages {
		n += len(m)
	}
	return n / len(messages)
}

func interKey(i int) string { return fmt.Sprintf(interKeyFmt, i) }

// interleaved is the shared round-robin load.
type interleaved struct {
	key     string   // the session the benchmarks read (the middle one)
	seqs    []uint64 // stream sequences of its newest 50 entries
	total   int
	dataset string
}

// ensureInterleaved loads interSessions x interPerSession entries written
// round-robin (one entry of every session, then the next round), the worst
// case for a subject scan, once per run.
func (e *env) ensureInterleaved(ctx context.Context) (*interleaved, error) {
	if e.inter != nil {
		return e.inter, nil
	}
	ns, per := e.sz.interSessions, e.sz.interPerSession
	keys := make([]string, ns)
	for i := range keys {
		keys[i] = bus.EncodeKey(interKey(i))
	}
	name := fmt.Sprintf("transcripts: %d sessions x %d entries, round-robin", ns, per)
	err := e.timed(name, ns*per, func() error {
		n, err := e.tr.BulkLoad(ctx, func(yield func(string, []byte) bool) {
			for r := 0; r < per; r++ {
				m := messages[r%len(messages)]
				for _, k := range keys {
					if !yield(k, m) {
						return
					}
				}
			}
		})
		if err == nil && n != uint64(ns*per) {
			err = fmt.Errorf("loaded %d entries, want %d", n, ns*per)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	in := &interleaved{key: interKey(ns / 2), total: ns * per,
		dataset: fmt.Sprintf("stream of %d entries (~%d B) from %d sessions round-robin", ns*per, avgMessageBytes(), ns)}
	if in.seqs, err = e.tr.Sequences(ctx, bus.EncodeKey(in.key), uint64(per-page), uint64(per)); err != nil {
		return nil, err
	}
	if len(in.seqs) != page {
		return nil, fmt.Errorf("interleaved session has %d newest sequences, want %d", len(in.seqs), page)
	}
	e.inter = in
	return in, nil
}

// ensureSingle loads one session of singleN entries (atomic batches), once.
func (e *env) ensureSingle(ctx context.Context) error {
	if e.singleDone {
		return nil
	}
	n := e.sz.singleN
	if err := e.timed(fmt.Sprintf("transcripts: 1 session x %d entries", n), n, func() error {
		return e.loadOne(ctx, singleKey, n)
	}); err != nil {
		return err
	}
	e.singleDone = true
	return nil
}

// loadOne writes n entries to one session with a streams bulk loader.
func (e *env) loadOne(ctx context.Context, key string, n int) error {
	enc := bus.EncodeKey(key)
	got, err := e.tr.BulkLoad(ctx, func(yield func(string, []byte) bool) {
		for i := 0; i < n; i++ {
			if !yield(enc, messages[i%len(messages)]) {
				return
			}
		}
	})
	if err == nil && got != uint64(n) {
		err = fmt.Errorf("loaded %d entries into %s, want %d", got, key, n)
	}
	return err
}

// tailOp reads a 50-entry page through the streams package and checks it.
func (e *env) tailOp(ctx context.Context, key string, offset, total uint64) func() error {
	enc := bus.EncodeKey(key)
	return func() error {
		es, n, err := e.tr.Tail(ctx, enc, page, offset)
		if err != nil {
			return err
		}
		if len(es) != page || n != total || es[page-1].N != total-1-offset {
			return fmt.Errorf("tail of %s at offset %d: %d entries, total %d", key, offset, len(es), n)
		}
		return nil
	}
}

func runTranscriptTailInterleaved(ctx context.Context, e *env) (Result, error) {
	in, err := e.ensureInterleaved(ctx)
	if err != nil {
		return Result{}, err
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	r, err := measure(ctx, e.sz.tr, e.tailOp(cctx, in.key, 0, uint64(e.sz.interPerSession)))
	r.Dataset = fmt.Sprintf("newest %d of a %d-entry session in a %s", page, e.sz.interPerSession, in.dataset)
	return r, err
}

func runTranscriptTail1M(ctx context.Context, e *env) (Result, error) {
	return e.runSingleTail(ctx, 0)
}

func runTranscriptOffset1M(ctx context.Context, e *env) (Result, error) {
	return e.runSingleTail(ctx, uint64(e.sz.singleN/2))
}

func (e *env) runSingleTail(ctx context.Context, offset uint64) (Result, error) {
	if err := e.ensureSingle(ctx); err != nil {
		return Result{}, err
	}
	cctx, cancel := opCtx(ctx)
	defer cancel()
	r, err := measure(ctx, e.sz.tr, e.tailOp(cctx, singleKey, offset, uint64(e.sz.singleN)))
	r.Dataset = fmt.Sprintf("%d entries at offset %d of a %d-entry session", page, offset, e.sz.singleN)
	return r, err
}
