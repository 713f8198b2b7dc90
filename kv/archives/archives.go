// Package archives is the `archives` object store: the transcripts of
// deleted, reset and archived sessions, kept as zstd-compressed JSONL (one
// transcript entry per line, exactly the bytes the transcript holds, each
// followed by "\n"; the lines `sessionbus import` reads) with the facts ops
// and sessions_list need in the object's metadata.
//
// An archive is written and read back (its digest compared) before the
// lifecycle operation that wrote it removes anything; its State says
// whether that operation finished (done) or must still be finished by a
// sweep (pending).
package archives

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
)

// Reasons an archive was written.
const (
	ReasonDeleted  = "deleted"  // sessionbus session delete, sub-agent cleanup "delete"
	ReasonReset    = "reset"    // sessionbus session reset
	ReasonArchived = "archived" // archiveAfterMinutes
)

// States of the lifecycle operation an archive belongs to.
const (
	StatePending = "pending" // written and verified; the session is not yet (all) removed
	StateDone    = "done"    // the operation finished
)

// ContentEncoding is recorded in every archive's metadata: the object's
// bytes are one zstd frame of the JSONL.
const ContentEncoding = "zstd"

// ErrNotFound means no archive has that id or session key.
var ErrNotFound = errors.New("archive not found")

// ErrCorrupt means an archive's bytes no longer decode to what was written.
var ErrCorrupt = errors.New("archive is corrupt")

// Meta is what an archive records about the session it holds.
type Meta struct {
	ID         string `json:"id"` // object name
	Key        string `json:"key"`
	SessionID  string `json:"sessionId,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	Reason     string `json:"reason"`
	State      string `json:"state"`
	Entries    int    `json:"entries"`
	Bytes      int64  `json:"bytes"`      // JSONL, uncompressed
	Compressed int64  `json:"compressed"` // object size
	At         int64  `json:"at"`         // when written, unix ms
	Digest     string `json:"digest"`     // sha256 of the JSONL, hex
	// LastSeq is the SB_TRANSCRIPTS sequence of the last entry archived
	// (0: empty transcript), so a sweep finishing the operation can tell
	// whether the transcript grew since.
	LastSeq uint64 `json:"lastSeq,omitempty"`
	// Entry is the session entry as it was (its JSON), for sessions_list
	// archived:true and restore.
	Entry json.RawMessage `json:"entry,omitempty"`
}

// Ratio is the JSONL size over the archive's.
func (m *Meta) Ratio() float64 {
	if m.Compressed == 0 {
		return 0
	}
	return float64(m.Bytes) / float64(m.Compressed)
}

// Store is the archives object store.
type Store struct {
	obs    jetstream.ObjectStore
	js     jetstream.JetStream
	bucket string
	cfg    jetstream.ObjectStoreConfig // what Open created it with, for Recreate
}

// Option configures Open.
type Option func(*options)

type options struct {
	replicas int
}

// WithReplicas sets the replica count of a new object store (default 1).
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// Open opens the object store, creating it if absent (an existing one
// keeps its settings).
func Open(ctx context.Context, js jetstream.JetStream, names bus.Names, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{js: js, bucket: names.ArchivesBucket(), cfg: jetstream.ObjectStoreConfig{
		Bucket:      names.ArchivesBucket(),
		Description: "sessionbus archived transcripts (zstd JSONL)",
		Storage:     jetstream.FileStorage,
		Replicas:    max(o.replicas, 1),
	}}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// open binds to the object store, creating it with s.cfg if absent.
func (s *Store) open(ctx context.Context) error {
	obs, err := s.js.ObjectStore(ctx, s.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = s.js.CreateObjectStore(ctx, s.cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = s.js.ObjectStore(ctx, s.bucket)
		}
	}
	if err != nil {
		return fmt.Errorf("open object store %s: %w", s.bucket, err)
	}
	s.obs = obs
	return nil
}

// Streams is the object store's stream (see bus.Guard).
func (s *Store) Streams() []string { return []string{"OBJ_" + s.bucket} }

// Recreate creates the object store again after an operator deleted it
// (see bus.Guard): the archives in it are gone, and new ones can be
// written again. The handle Open returned names the store and its stream,
// so it serves the new one as it is.
func (s *Store) Recreate(ctx context.Context, _ string) error {
	_, err := s.js.CreateObjectStore(ctx, s.cfg)
	if errors.Is(err, jetstream.ErrBucketExists) {
		return nil
	}
	return err
}

// Bucket is the object store's name (for `nats obj ls BUCKET`).
func (s *Store) Bucket() string { return s.bucket }

// Lines produces a transcript's entries, in order, by calling emit for
// each; an error from emit must be returned.
type Lines func(emit func(entry []byte) error) error

// Progress is told how many entries were written so far (may be nil).
type Progress func(entries int)

// Write stores the entries lines produces as the archive m.ID (replacing
// one of that name), then reads it back and compares its digest and count
// with what was written: only a verified archive returns nil. m's Entries,
// Bytes, Compressed, Digest and At are filled in.
func (s *Store) Write(ctx context.Context, m *Meta, lines Lines, progress Progress) error {
	if m.ID == "" || m.Key == "" {
		return errors.New("archive: id and key are required")
	}
	// The digest and count are known only once the body is read; the
	// metadata goes first as "pending" and is completed right after. It is
	// taken before lines starts: lines may record in m (the last sequence
	// it read) while the body is written.
	m.At = time.Now().UnixMilli()
	if m.State == "" {
		m.State = StatePending
	}
	pending := jetstream.ObjectMeta{Name: m.ID, Description: describe(m), Metadata: m.metadata()}
	pr, pw := io.Pipe()
	h := sha256.New()
	var n int
	var size int64
	go func() {
		enc, err := getEncoder(pw)
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		defer encoders.Put(enc)
		bw := bufio.NewWriterSize(io.MultiWriter(enc, h), 64<<10)
		err = lines(func(entry []byte) error {
			if slices.Contains(entry, '\n') {
				return fmt.Errorf("entry %d holds a newline: not one JSONL line", n)
			}
			if _, err := bw.Write(entry); err != nil {
				return err
			}
			if err := bw.WriteByte('\n'); err != nil {
				return err
			}
			n++
			size += int64(len(entry)) + 1
			if progress != nil && n%1000 == 0 {
				progress(n)
			}
			return nil
		})
		if err == nil {
			err = bw.Flush()
		}
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
		pw.CloseWithError(err) // nil: EOF
	}()
	info, err := s.obs.Put(ctx, pending, pr)
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("write archive %s of %s: %w", m.ID, m.Key, err)
	}
	// Put read the body to its end, so lines has returned: m is ours again.
	m.Entries, m.Bytes, m.Compressed, m.Digest = n, size, int64(info.Size), hex.EncodeToString(h.Sum(nil))
	if err := s.obs.UpdateMeta(ctx, m.ID, jetstream.ObjectMeta{Name: m.ID, Description: describe(m), Metadata: m.metadata()}); err != nil {
		return fmt.Errorf("write archive %s of %s: record its digest: %w", m.ID, m.Key, err)
	}
	if progress != nil {
		progress(n)
	}
	got, err := s.Read(ctx, m.ID, io.Discard)
	if err != nil {
		return fmt.Errorf("verify archive %s of %s: %w", m.ID, m.Key, err)
	}
	if got.Entries != n || got.Digest != m.Digest {
		return fmt.Errorf("verify archive %s of %s: %w: read back %d entries, wrote %d", m.ID, m.Key, ErrCorrupt, got.Entries, n)
	}
	return nil
}

func describe(m *Meta) string {
	return fmt.Sprintf("%s %s (%s)", m.Reason, m.Key, m.SessionID)
}

// SetState records the state of the archive's lifecycle operation.
func (s *Store) SetState(ctx context.Context, id, state string) error {
	m, err := s.Info(ctx, id)
	if err != nil {
		return err
	}
	if m.State == state {
		return nil
	}
	m.State = state
	if err := s.obs.UpdateMeta(ctx, id, jetstream.ObjectMeta{Name: id, Description: describe(m), Metadata: m.metadata()}); err != nil {
		return fmt.Errorf("archive %s: record state %s: %w", id, state, err)
	}
	return nil
}

// Info reads an archive's metadata.
func (s *Store) Info(ctx context.Context, id string) (*Meta, error) {
	info, err := s.obs.GetInfo(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: no archive %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("read archive %s: %w", id, err)
	}
	return metaOf(info)
}

// Read writes the archive's JSONL, decompressed, to w, checking it against
// the digest recorded when it was written. A corrupt or truncated object
// is an error wrapping ErrCorrupt; w may then have received a prefix.
func (s *Store) Read(ctx context.Context, id string, w io.Writer) (*Meta, error) {
	m, err := s.Info(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.Digest == "" {
		return nil, fmt.Errorf("%w: archive %s of %s was never completed (written by an operation that stopped; the next sweep rewrites or removes it)", ErrCorrupt, id, m.Key)
	}
	obj, err := s.obs.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read archive %s: %w", id, err)
	}
	defer obj.Close()
	dec, err := getDecoder(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: archive %s of %s: %v", ErrCorrupt, id, m.Key, err)
	}
	defer func() { _ = dec.Reset(nil); decoders.Put(dec) }()
	h := sha256.New()
	cw := &countWriter{}
	if _, err := io.Copy(io.MultiWriter(w, h, cw), dec); err != nil {
		return nil, fmt.Errorf("%w: archive %s of %s does not decode (%v): copy it with `nats obj get %s %s` before removing it", ErrCorrupt, id, m.Key, err, s.bucket, id)
	}
	got := *m
	got.Digest, got.Entries = hex.EncodeToString(h.Sum(nil)), cw.lines
	if got.Digest != m.Digest || int64(cw.n) != m.Bytes {
		return nil, fmt.Errorf("%w: archive %s of %s decodes to %d bytes with digest %.12s…, it was written as %d bytes with digest %.12s…",
			ErrCorrupt, id, m.Key, cw.n, got.Digest, m.Bytes, m.Digest)
	}
	return &got, nil
}

// Encoders and decoders are reused: a new one allocates its tables
// (megabytes) each time.
var encoders, decoders sync.Pool

func getEncoder(w io.Writer) (*zstd.Encoder, error) {
	if enc, ok := encoders.Get().(*zstd.Encoder); ok {
		enc.Reset(w)
		return enc, nil
	}
	return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
}

func getDecoder(r io.Reader) (*zstd.Decoder, error) {
	if dec, ok := decoders.Get().(*zstd.Decoder); ok {
		return dec, dec.Reset(r)
	}
	return zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
}

type countWriter struct {
	n     int
	lines int
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	for _, b := range p {
		if b == '\n' {
			c.lines++
		}
	}
	return len(p), nil
}

// List returns every archive's metadata, oldest first. Objects that are
// not archives (someone put them there by hand) are skipped.
func (s *Store) List(ctx context.Context) ([]*Meta, error) {
	var out []*Meta
	if err := s.Each(ctx, func(m *Meta) { out = append(out, m) }); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, olderFirst)
	return out, nil
}

func olderFirst(a, b *Meta) int {
	return cmp.Or(cmp.Compare(a.At, b.At), strings.Compare(a.ID, b.ID))
}

// Each calls fn with every archive's metadata, in no particular order,
// one at a time: the periodic passes over the archives (the sweep, the
// disk budget) keep what they need of each and not the whole list, which
// at a hundred thousand archives was a hundred megabytes of heap every
// minute.
func (s *Store) Each(ctx context.Context, fn func(*Meta)) error {
	w, err := s.obs.Watch(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("list archives: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("list archives: %w", ctx.Err())
		case info := <-w.Updates():
			if info == nil {
				return nil // every current archive delivered
			}
			if m, err := metaOf(info); err == nil {
				fn(m)
			}
		}
	}
}

// Find resolves an archive id, or a session key or sessionId (its newest
// archive).
func (s *Store) Find(ctx context.Context, keyOrID string) (*Meta, error) {
	if m, err := s.Info(ctx, keyOrID); err == nil {
		return m, nil
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Key == keyOrID || all[i].SessionID == keyOrID {
			return all[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no archive has id, session key or sessionId %q (list them with `sessionbus archive ls`)", ErrNotFound, keyOrID)
}

// Delete removes an archive.
func (s *Store) Delete(ctx context.Context, id string) error {
	err := s.obs.Delete(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	return err
}

// Usage is what the archives hold.
type Usage struct {
	Archives   int   `json:"archives"`
	Pending    int   `json:"pending"`
	Entries    int64 `json:"entries"`
	Bytes      int64 `json:"bytes"`      // JSONL, uncompressed
	Compressed int64 `json:"compressed"` // sum of the objects' sizes
	// StoreBytes is what the object store's stream holds on disk
	// (chunks, metadata and the tombstones of deleted archives).
	StoreBytes uint64 `json:"storeBytes"`
}

// Usage sums the archives (for `sessionbus archive budget` and inspect).
func (s *Store) Usage(ctx context.Context) (Usage, []*Meta, error) {
	var all []*Meta
	u, _, err := s.tally(ctx, func(m *Meta) { all = append(all, m) })
	slices.SortStableFunc(all, olderFirst)
	return u, all, err
}

// Tally is Usage without the list: the sums and the oldest archive that
// is done (nil if none), in one pass that keeps no archive but that one.
func (s *Store) Tally(ctx context.Context) (Usage, *Meta, error) {
	return s.tally(ctx, nil)
}

func (s *Store) tally(ctx context.Context, keep func(*Meta)) (Usage, *Meta, error) {
	var u Usage
	var oldest *Meta
	err := s.Each(ctx, func(m *Meta) {
		u.Archives++
		u.Entries += int64(m.Entries)
		u.Bytes += m.Bytes
		u.Compressed += m.Compressed
		if m.State == StatePending {
			u.Pending++
		}
		if m.State == StateDone && (oldest == nil || olderFirst(m, oldest) < 0) {
			oldest = m
		}
		if keep != nil {
			keep(m)
		}
	})
	if err != nil {
		return Usage{}, nil, err
	}
	st, err := s.obs.Status(ctx)
	if err != nil {
		return u, oldest, fmt.Errorf("archives status: %w", err)
	}
	u.StoreBytes = st.Size()
	return u, oldest, nil
}

// metadata keys; flat, so `nats obj info archives ID` shows them.
const (
	mdKey, mdSessionID, mdAgentID, mdReason, mdState = "key", "sessionId", "agentId", "reason", "state"
	mdEntries, mdBytes, mdAt, mdDigest, mdLastSeq    = "entries", "bytes", "at", "digest", "lastSeq"
	mdEntry, mdEncoding                              = "entry", "content-encoding"
)

func (m *Meta) metadata() map[string]string {
	md := map[string]string{
		mdKey: m.Key, mdReason: m.Reason, mdState: m.State, mdEncoding: ContentEncoding,
		mdAt: strconv.FormatInt(m.At, 10),
	}
	set := func(k, v string) {
		if v != "" {
			md[k] = v
		}
	}
	set(mdSessionID, m.SessionID)
	set(mdAgentID, m.AgentID)
	set(mdDigest, m.Digest)
	if m.Digest != "" {
		md[mdEntries] = strconv.Itoa(m.Entries)
		md[mdBytes] = strconv.FormatInt(m.Bytes, 10)
	}
	if m.LastSeq > 0 {
		md[mdLastSeq] = strconv.FormatUint(m.LastSeq, 10)
	}
	if len(m.Entry) > 0 {
		md[mdEntry] = string(m.Entry)
	}
	return md
}

func metaOf(info *jetstream.ObjectInfo) (*Meta, error) {
	md := info.Metadata
	if md[mdKey] == "" || md[mdEncoding] != ContentEncoding {
		return nil, fmt.Errorf("object %s is not an archive", info.Name)
	}
	m := &Meta{
		ID: info.Name, Key: md[mdKey], SessionID: md[mdSessionID], AgentID: md[mdAgentID],
		Reason: md[mdReason], State: md[mdState], Digest: md[mdDigest], Compressed: int64(info.Size),
	}
	m.Entries, _ = strconv.Atoi(md[mdEntries])
	m.Bytes, _ = strconv.ParseInt(md[mdBytes], 10, 64)
	m.At, _ = strconv.ParseInt(md[mdAt], 10, 64)
	m.LastSeq, _ = strconv.ParseUint(md[mdLastSeq], 10, 64)
	if e := md[mdEntry]; e != "" && json.Valid([]byte(e)) {
		m.Entry = json.RawMessage(e)
	}
	return m, nil
}
