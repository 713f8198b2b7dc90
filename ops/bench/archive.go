package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/lifecycle"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// archiveKey is the session archive_10k and archive_read_10k archive.
const archiveKey = "agent:main:bench:archive"

// archiveFixture is the archived session, loaded once per run.
type archiveFixture struct {
	ops     *lifecycle.Ops
	entry   *sessions.Entry
	n       int
	jsonl   int64 // bytes of the transcript's JSONL
	archive *archives.Meta
}

func (e *env) archiveSizes() (entries int, p plan) {
	if e.o.Quick {
		return 2000, plan{warm: 1, ops: 3}
	}
	return 10_000, plan{warm: 2, ops: 30}
}

// archiveFixture appends the 10,000 realistic entries (archives.
// SampleEntries: user turns, assistant replies with tool calls, tool
// results) and writes one archive of them for the reads.
func (e *env) archiveFixture(ctx context.Context) (*archiveFixture, error) {
	n, _ := e.archiveSizes()
	names := e.names
	ops := &lifecycle.Ops{Transcripts: e.tr, JS: e.js}
	var err error
	if ops.Sessions, err = sessions.Open(ctx, e.js, names); err != nil {
		return nil, err
	}
	if ops.Archives, err = archives.Open(ctx, e.js, names); err != nil {
		return nil, err
	}
	f := &archiveFixture{ops: ops, n: n, entry: &sessions.Entry{Key: archiveKey, AgentID: "main", SessionID: sessions.NewID()}}
	entries := archives.SampleEntries(n, 42)
	for _, x := range entries {
		f.jsonl += int64(len(x)) + 1
	}
	// both benchmarks use it: the second finds the session loaded
	if cur, _, err := ops.Sessions.Get(ctx, archiveKey); err == nil {
		f.entry = cur
		if c, err := e.tr.Count(ctx, bus.EncodeKey(archiveKey)); err == nil && c == uint64(n) {
			f.archive, err = ops.Archive(ctx, f.entry, archives.ReasonArchived, nil)
			return f, err
		}
		return nil, fmt.Errorf("session %s is there with a transcript of another length", archiveKey)
	}
	err = e.timed("archive session (realistic entries)", n, func() error {
		if _, err := ops.Sessions.Create(ctx, f.entry); err != nil {
			return err
		}
		for i := 0; i < n; i += transcripts.MaxBatch {
			if _, err := e.tr.Append(ctx, bus.EncodeKey(archiveKey), entries[i:min(i+transcripts.MaxBatch, n)]...); err != nil {
				return err
			}
		}
		f.archive, err = ops.Archive(ctx, f.entry, archives.ReasonArchived, nil)
		return err
	})
	return f, err
}

func (f *archiveFixture) describe(r *Result, p50 time.Duration) {
	a := f.archive
	r.Dataset = fmt.Sprintf("%d entries, %.2f MB JSONL -> %.2f MB zstd: compression ratio %.2f, %.1f B/entry archived (%.1f B/entry JSONL)",
		f.n, float64(f.jsonl)/1e6, float64(a.Compressed)/1e6, a.Ratio(), float64(a.Compressed)/float64(f.n), float64(f.jsonl)/float64(f.n))
	if p50 > 0 {
		r.MBPerSec = f64(round(float64(f.jsonl)/p50.Seconds()/1e6, 1))
	}
}

// archive_10k: archive a 10,000-entry transcript end to end, as delete and
// reset do before removing anything: read it from SB_TRANSCRIPTS (pages of
// 1,000), compress it as zstd JSONL into the archives object store, read
// it back and compare digests. MB/s counts JSONL bytes over the p50.
// The archive is deleted after each op, untimed.
func runArchive10k(ctx context.Context, e *env) (Result, error) {
	f, err := e.archiveFixture(ctx)
	if err != nil {
		return Result{}, err
	}
	_, p := e.archiveSizes()
	r, err := measureSpans(ctx, p, func() (time.Duration, error) {
		t0 := time.Now()
		m, err := f.ops.Archive(ctx, f.entry, archives.ReasonArchived, nil)
		d := time.Since(t0)
		if err != nil {
			return d, err
		}
		if m.Entries != f.n || m.Bytes != f.jsonl {
			return d, fmt.Errorf("archived %d entries, %d bytes; want %d, %d", m.Entries, m.Bytes, f.n, f.jsonl)
		}
		return d, f.ops.Archives.Delete(ctx, m.ID)
	})
	f.describe(&r, time.Duration(r.P50))
	return r, err
}

// archive_read_10k: read one 10,000-entry archive back (decompress and
// check its digest), as `sessionbus archive get` does.
func runArchiveRead10k(ctx context.Context, e *env) (Result, error) {
	f, err := e.archiveFixture(ctx)
	if err != nil {
		return Result{}, err
	}
	_, p := e.archiveSizes()
	r, err := measure(ctx, p, func() error {
		m, err := f.ops.Archives.Read(ctx, f.archive.ID, io.Discard)
		if err == nil && m.Entries != f.n {
			err = fmt.Errorf("read %d entries, want %d", m.Entries, f.n)
		}
		return err
	})
	f.describe(&r, time.Duration(r.P50))
	return r, err
}
