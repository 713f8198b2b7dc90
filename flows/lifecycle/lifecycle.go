// Package lifecycle deletes, resets, archives and restores sessions: the
// one place that removes a session's data, and only after its transcript
// is archived (objects/archives) and read back.
//
// Each operation is a sequence of idempotent steps whose progress is the
// archive's state: the archive is written (state pending) and verified
// first, then the session's pieces are removed, then the archive is marked
// done. A process that stops in between leaves a pending archive, and the
// next sweep (Finish) completes the operation from it.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/flows/spawns"
	"github.com/sessionbus/sessionbus/flows/stores"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/claims"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/kv/subagents"
	"github.com/sessionbus/sessionbus/kv/threadbindings"
	"github.com/sessionbus/sessionbus/kv/watchers"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/signals"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Steps of an operation, in order, as the test hook sees them: the hook
// runs before each, and an error from it stops the operation there, as a
// crash would.
const (
	StepArchive    = "archive"    // write and verify the archive
	StepCursors    = "cursors"    // watch cursors (kv/watchers)
	StepSignals    = "signals"    // signal log and head (delete only)
	StepTranscript = "transcript" // messages and index
	StepEntry      = "entry"      // delete the entry, or give it a new sessionId (reset)
	StepDone       = "done"       // mark the archive done
)

// Ops are the lifecycle operations over one deployment's stores.
type Ops struct {
	Sessions    *sessions.Store
	Transcripts *transcripts.Store
	Archives    *archives.Store
	Signals     *signals.Log    // nil: no signal log to clean
	Watchers    *watchers.Store // nil: no cursors to clean
	// Subagents and ThreadBindings, when set, end the thread binding of a
	// deleted or archived thread-bound child (nil: none to end).
	Subagents      *subagents.Registry
	ThreadBindings *threadbindings.Store
	JS             jetstream.JetStream // measures SB_TRANSCRIPTS for the disk budget
	// Claims, when set, serializes the operations on one session across
	// processes (a lease per session key): a second delete of a session
	// being deleted is refused as busy instead of archiving what the
	// first one already removed.
	Claims *claims.Claims
	// Stamps, when set, is the process's table of session stamps that
	// maintenance and the disk budget read instead of the whole bucket
	// (nil: each pass reads the bucket).
	Stamps *Stamps
	// LockLease is how long the claim of a process that died mid-operation
	// keeps others off its session (default DefaultPendingGrace; at least
	// a second, the server's TTL resolution).
	LockLease time.Duration
	Log       *slog.Logger
	Now       func() time.Time
	// PendingGrace is how old a pending archive must be before Finish
	// completes its operation: younger, the process that wrote it is
	// likely still at work (default DefaultPendingGrace).
	PendingGrace time.Duration
	// BeforeStep, for tests only, runs before each step; an error stops
	// the operation there, leaving what a crash at that point leaves.
	BeforeStep func(op, step string) error
}

// New is the operations over the stores a worker or a gateway opened.
func New(s *stores.Stores, log *slog.Logger) *Ops {
	return &Ops{
		Sessions: s.Sessions, Transcripts: s.Transcripts, Archives: s.Archives, Signals: s.Signals,
		Watchers: s.Watchers, Claims: s.Claims, JS: s.JS, Log: log,
		Subagents: s.Subagents, ThreadBindings: s.ThreadBindings,
	}
}

// DefaultPendingGrace: an operation's steps take well under this.
const DefaultPendingGrace = time.Minute

// Result reports one operation.
type Result struct {
	Op           string `json:"op"`
	Key          string `json:"key"`
	SessionID    string `json:"sessionId,omitempty"`
	NewSessionID string `json:"newSessionId,omitempty"`
	ArchiveID    string `json:"archiveId,omitempty"`
	Entries      int    `json:"entries"`
	Bytes        int64  `json:"bytes"`
	Compressed   int64  `json:"compressed"`
}

// Summary is the one line the CLI prints on stderr.
func (r *Result) Summary() string {
	s := fmt.Sprintf("%s %s: archived %d entries (%d bytes, %d compressed) as %s", r.Op, r.Key, r.Entries, r.Bytes, r.Compressed, r.ArchiveID)
	if r.NewSessionID != "" {
		s += "; new sessionId " + r.NewSessionID
	}
	return s
}

func (o *Ops) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o *Ops) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.Default()
}

func (o *Ops) step(op, step string) error {
	if o.BeforeStep != nil {
		return o.BeforeStep(op, step)
	}
	return nil
}

// Delete archives the session's transcript (reason: archives.ReasonDeleted
// or ReasonArchived) and removes the session: its watch cursors, signal
// log and head, transcript and index, and entry.
func (o *Ops) Delete(ctx context.Context, key, reason string, progress archives.Progress) (*Result, error) {
	if reason != archives.ReasonDeleted && reason != archives.ReasonArchived {
		return nil, fmt.Errorf("lifecycle: delete reason %q", reason)
	}
	return o.run(ctx, key, reason, "delete", progress)
}

// Reset archives the session's transcript and starts a new one under the
// same key: a new sessionId, an empty transcript, the cursors it held as
// watcher gone, as OpenClaw's reset does; its settings (label, model,
// route) stay.
func (o *Ops) Reset(ctx context.Context, key string, progress archives.Progress) (*Result, error) {
	return o.run(ctx, key, archives.ReasonReset, "reset", progress)
}

func (o *Ops) run(ctx context.Context, key, reason, op string, progress archives.Progress) (*Result, error) {
	if err := rules.ValidateSessionKeyInput(key); err != nil {
		var ie *rules.InputError
		if errors.As(err, &ie) {
			return nil, bus.BadRequest(ie.Msg)
		}
		return nil, bus.BadRequest(err.Error())
	}
	release, err := o.lock(ctx, key, op)
	if err != nil {
		return nil, err
	}
	defer release()
	return o.runLocked(ctx, key, reason, op, progress)
}

// lock takes the session's lifecycle claim (no-op without Claims).
func (o *Ops) lock(ctx context.Context, key, op string) (release func(), err error) {
	if o.Claims == nil {
		return func() {}, nil
	}
	ck := "lifecycle." + bus.EncodeKey(key)
	lease := o.LockLease
	if lease <= 0 {
		lease = DefaultPendingGrace // a live operation's steps take far less
	}
	rev, err := o.Claims.Take(ctx, ck, op, lease)
	if errors.Is(err, claims.ErrTaken) {
		return nil, &busyError{bus.Errorf(bus.CodeUnavailable, "%s %s: another delete, reset or archive of this session is in progress: retry in a minute", op, key)}
	}
	if err != nil {
		return nil, err
	}
	return func() {
		// a fresh context: the operation's may have ended
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.Claims.Release(c, ck, rev); err != nil {
			o.log().Debug("lifecycle: release claim (its lease ends it)", "key", key, "err", err)
		}
	}, nil
}

func (o *Ops) runLocked(ctx context.Context, key, reason, op string, progress archives.Progress) (*Result, error) {
	e, _, err := o.Sessions.Get(ctx, key)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil, bus.Errorf(bus.CodeNotFound, "unknown session key %q: nothing to %s (list sessions with `sessionbus call sessions_list`)", key, op)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: read entry: %w", op, key, err)
	}
	m, err := o.archive(ctx, e, reason, op, progress)
	if err != nil {
		return nil, err
	}
	res := &Result{Op: op, Key: key, SessionID: e.SessionID, ArchiveID: m.ID, Entries: m.Entries, Bytes: m.Bytes, Compressed: m.Compressed}
	if res.NewSessionID, err = o.remove(ctx, m, op); err != nil {
		return nil, fmt.Errorf("%s %s: archived as %s, then: %w (the next sweep finishes it)", op, key, m.ID, err)
	}
	return res, nil
}

// archiveID names an archive: the sessionId it holds and when it was
// written, so a second archive of one incarnation (an operation started
// over) never replaces the first.
func archiveID(e *sessions.Entry, now time.Time) string {
	id := e.SessionID
	if id == "" {
		id = "k." + bus.EncodeKey(e.Key)
	}
	return id + "." + strconv.FormatInt(now.UnixMilli(), 36)
}

// maxArchiveRounds bounds how often archive writes again because the
// transcript grew while it was written (a turn in progress).
const maxArchiveRounds = 4

// archive writes the transcript of e as a pending archive, and writes it
// again if entries were appended meanwhile, so what is removed next is
// exactly what was archived.
func (o *Ops) archive(ctx context.Context, e *sessions.Entry, reason, op string, progress archives.Progress) (*archives.Meta, error) {
	if err := o.step(op, StepArchive); err != nil {
		return nil, err
	}
	enc := bus.EncodeKey(e.Key)
	entryJSON, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	id := archiveID(e, o.now())
	for range maxArchiveRounds {
		m := &archives.Meta{ID: id, Key: e.Key, SessionID: e.SessionID, AgentID: e.AgentID, Reason: reason, Entry: entryJSON}
		if err := o.Archives.Write(ctx, m, o.lines(ctx, enc, m), progress); err != nil {
			return nil, fmt.Errorf("%s %s: %w (nothing was removed)", op, e.Key, err)
		}
		n, err := o.Transcripts.Count(ctx, enc)
		if err != nil {
			return nil, fmt.Errorf("%s %s: count transcript: %w (nothing was removed)", op, e.Key, err)
		}
		if n == uint64(m.Entries) {
			return m, nil
		}
		o.log().Info("lifecycle: transcript grew while archived; archiving again", "key", e.Key, "archived", m.Entries, "now", n)
	}
	return nil, bus.Errorf(bus.CodeUnavailable, "%s %s: the transcript keeps growing while it is archived (a turn is running): retry when it is idle; nothing was removed", op, e.Key)
}

// Archive writes and verifies a pending archive of e's transcript and
// removes nothing: the first half of Delete and Reset, for the archive
// benchmarks. The caller deletes the archive, or a sweep finishes the
// operation its reason names.
func (o *Ops) Archive(ctx context.Context, e *sessions.Entry, reason string, progress archives.Progress) (*archives.Meta, error) {
	return o.archive(ctx, e, reason, opOf(reason), progress)
}

// readPage is how many entries archive reads per round trip.
const readPage = 1000

// lines reads the transcript in pages, recording the last sequence in m.
func (o *Ops) lines(ctx context.Context, enc string, m *archives.Meta) archives.Lines {
	return func(emit func([]byte) error) error {
		for from := uint64(0); ; from += readPage {
			page, err := o.Transcripts.Read(ctx, enc, from, from+readPage)
			if err != nil {
				return err
			}
			for _, e := range page {
				if err := emit(e.Data); err != nil {
					return err
				}
				m.LastSeq = e.Seq
			}
			if len(page) < readPage {
				return nil
			}
		}
	}
}

// remove runs the steps after the archive, each idempotent, and marks the
// archive done. For a reset it returns the new sessionId.
func (o *Ops) remove(ctx context.Context, m *archives.Meta, op string) (string, error) {
	enc := bus.EncodeKey(m.Key)
	reset := m.Reason == archives.ReasonReset
	if err := o.step(op, StepCursors); err != nil {
		return "", err
	}
	if o.Watchers != nil {
		del := o.Watchers.DeleteSession
		if reset {
			del = o.Watchers.DeleteWatcher
		}
		if err := del(ctx, m.Key); err != nil {
			return "", fmt.Errorf("remove watch cursors: %w", err)
		}
	}
	if err := o.step(op, StepSignals); err != nil {
		return "", err
	}
	if o.Signals != nil && !reset {
		if err := o.Signals.Delete(ctx, m.Key); err != nil {
			return "", err
		}
	}
	if err := o.step(op, StepTranscript); err != nil {
		return "", err
	}
	if err := o.Transcripts.Delete(ctx, enc); err != nil {
		return "", err
	}
	if err := o.step(op, StepEntry); err != nil {
		return "", err
	}
	var newID string
	if reset {
		cur, _, err := o.Sessions.Update(ctx, m.Key, func(e *sessions.Entry) error {
			if e.SessionID != m.SessionID {
				newID = e.SessionID // a reset already gave it its new id
				return record.ErrUnchanged
			}
			newID = sessions.NewID()
			resetEntry(e, newID, o.now())
			return nil
		})
		if err != nil && !errors.Is(err, sessions.ErrNotFound) {
			return "", fmt.Errorf("give %s a new sessionId: %w", m.Key, err)
		}
		if cur != nil {
			newID = cur.SessionID
		}
	} else {
		e, rev, err := o.Sessions.Get(ctx, m.Key)
		switch {
		case errors.Is(err, sessions.ErrNotFound):
		case err != nil:
			return "", fmt.Errorf("read entry: %w", err)
		case e.SessionID == m.SessionID:
			if err := o.Sessions.KV().Delete(ctx, bus.EncodeKey(m.Key), jetstream.LastRevision(rev)); err != nil {
				return "", fmt.Errorf("delete entry: %w", err)
			}
		}
	}
	if !reset {
		if err := o.unbind(ctx, m.Key); err != nil {
			return "", err
		}
	}
	if err := o.step(op, StepDone); err != nil {
		return "", err
	}
	if err := o.Archives.SetState(ctx, m.ID, archives.StateDone); err != nil {
		return "", err
	}
	o.log().Info("lifecycle: session "+m.Reason, "key", m.Key, "sessionId", m.SessionID, "archive", m.ID, "entries", m.Entries, "newSessionId", newID)
	return newID, nil
}

// resetEntry makes e a new incarnation: a new sessionId, no run state,
// counters or import marks (they named the transcript that is gone); the
// session's identity, route and settings stay.
func resetEntry(e *sessions.Entry, newID string, now time.Time) {
	e.SessionID = newID
	e.UpdatedAt = now.UnixMilli()
	e.InputTokens, e.OutputTokens, e.TotalTokens, e.ContextTokens = 0, 0, 0, 0
	e.Status, e.StartedAt, e.EndedAt, e.AbortedLastRun = "", 0, 0, false
	e.SetRare(func(r *sessions.RareFields) {
		r.CacheRead, r.CacheWrite, r.CompactionCount, r.RuntimeMs, r.Imports = 0, 0, 0, 0, nil
		// the daily clock starts with the new sessionId; the idle one with
		// its first human message
		r.SessionStartedAt, r.LastInteractionAt = now.UnixMilli(), 0
	})
}

// unbind ends the thread binding of a deleted or archived sub-agent: the
// conversation its requester spawned it in routes by the rules again.
// Idempotent, like every step after the archive.
func (o *Ops) unbind(ctx context.Context, key string) error {
	if o.Subagents == nil || o.ThreadBindings == nil {
		return nil
	}
	rec, _, err := o.Subagents.Get(ctx, key)
	if errors.Is(err, subagents.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the registry record of %s: %w", key, err)
	}
	if err := spawns.Unbind(ctx, o.ThreadBindings, rec); err != nil {
		return fmt.Errorf("end the thread binding of %s: %w", key, err)
	}
	return nil
}
