// Package importer loads JSONL transcripts into sessions: a file given to
// `sessionbus import` (Import) or a session of an OpenClaw state directory
// (ImportEntry). The session entry is created if absent and the file's
// entries are appended once, however often the import runs or stops.
package importer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/record"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/rules"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// ImportOptions describe the session a transcript is loaded into.
type ImportOptions struct {
	SessionKey string
	AgentID    string
	Label      string
	SpawnedBy  string
}

// ImportResult reports what an import wrote.
type ImportResult struct {
	SessionKey string `json:"sessionKey"`
	SessionID  string `json:"sessionId"`
	Created    bool   `json:"created"`
	// ImportID names the file's entries (a hash of them): importing the
	// same file into the same session again appends nothing.
	ImportID string `json:"importId"`
	Imported int    `json:"imported"` // entries appended by this call
	// Present is how many of the file's entries an earlier, interrupted or
	// completed, import of the same file had already written.
	Present    int    `json:"alreadyPresent"`
	Skipped    int    `json:"skipped"`
	FirstEntry uint64 `json:"firstEntry"`
	Total      uint64 `json:"totalEntries"`
}

// Summary is the one line the CLI prints on stderr.
func (r *ImportResult) Summary() string {
	n := r.Imported + r.Present
	switch {
	case r.Present == 0:
		return fmt.Sprintf("imported %d entries into %s", r.Imported, r.SessionKey)
	case r.Imported == 0:
		return fmt.Sprintf("already imported: all %d entries of this file are in %s, 0 appended", n, r.SessionKey)
	default:
		return fmt.Sprintf("resumed: appended %d of %d entries into %s (%d were already there)", r.Imported, n, r.SessionKey, r.Present)
	}
}

const (
	labelMaxLength   = 512
	importMaxLine    = 16 << 20
	importLineFormat = `each line must be {"role":..,"content":..} or {"type":"message","message":{...}}`
)

// Import reads a JSONL transcript and appends it to a session, creating the
// entry if absent. Every line is checked before anything is written, so a
// bad file writes nothing.
func Import(ctx context.Context, store *sessions.Store, tr *transcripts.Store, o ImportOptions, in io.Reader, now time.Time) (*ImportResult, error) {
	key := strings.TrimSpace(o.SessionKey)
	if err := rules.ValidateSessionKeyInput(key); err != nil {
		return nil, bus.Thrown(err)
	}
	if o.SpawnedBy != "" {
		if err := rules.ValidateSessionKeyInput(o.SpawnedBy); err != nil {
			return nil, bus.BadRequest("--spawned-by: " + err.Error())
		}
	}
	agentID := strings.ToLower(strings.TrimSpace(o.AgentID))
	if agentID == "" {
		agentID = rules.AgentIDFromKey(key)
	} else if !rules.ValidAgentID(agentID) {
		return nil, bus.BadRequest(fmt.Sprintf("--agent %q is invalid: agent ids must match [a-z0-9][a-z0-9_-]{0,63}", o.AgentID))
	}
	if len([]rune(o.Label)) > labelMaxLength {
		return nil, bus.BadRequest(fmt.Sprintf("--label is %d characters; the limit is %d", len([]rune(o.Label)), labelMaxLength))
	}
	msgs, skipped, err := readTranscript(in, false)
	if err != nil {
		return nil, bus.BadRequest(err.Error())
	}
	e := &sessions.Entry{
		Key: key, AgentID: agentID, SessionID: sessions.NewID(), Label: o.Label,
		SpawnedBy: o.SpawnedBy, CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli(),
	}
	if o.SpawnedBy != "" {
		depth := 1
		if parent, _, err := store.Get(ctx, o.SpawnedBy); err == nil && parent.SpawnDepth != nil {
			depth = *parent.SpawnDepth + 1
		}
		e.SpawnDepth = &depth
	}
	return importInto(ctx, store, tr, e, msgs, skipped, importID(msgs), now.UnixMilli())
}

// importInto creates e unless its key exists, appends msgs once under
// importID (appendOnce) and, when touch is not 0, moves the session's
// updatedAt to at least touch.
func importInto(ctx context.Context, store *sessions.Store, tr *transcripts.Store, e *sessions.Entry, msgs [][]byte, skipped int, id string, touch int64) (*ImportResult, error) {
	key := e.Key
	res := &ImportResult{SessionKey: key, Skipped: skipped, ImportID: id}
	enc := bus.EncodeKey(key)
	cur, rev, fresh, err := createMarked(ctx, store, tr, e, enc, res, msgs)
	if err != nil {
		return nil, err
	}
	if !fresh && len(msgs) > 0 {
		if err := appendOnce(ctx, store, tr, key, enc, res, msgs); err != nil {
			return nil, err
		}
	}
	cur, _, err = store.UpdateFrom(ctx, key, cur, rev, func(cur *sessions.Entry) error {
		changed := false
		if touch > cur.UpdatedAt {
			cur.UpdatedAt, changed = touch, true
		}
		if m := cur.Import(res.ImportID); m != nil && !m.Done {
			done := *m
			done.Done = true
			cur.SetImport(done)
			changed = true
		}
		if !changed {
			return record.ErrUnchanged
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update session %s: %w", key, err)
	}
	res.SessionID = cur.SessionID
	if !fresh {
		if res.Total, err = tr.Count(ctx, enc); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// createMarked creates e unless its key exists, carrying the import's mark
// from the start, and appends msgs to the new session at the length it
// read before creating it. A session migrated from another store costs a
// create, the append and the final update: the round trips appendOnce
// spends on finding or recording the mark of an existing session (each a
// read and an fsynced write) made a 100k-session import a third slower.
// fresh reports that this call created the session and appended every
// entry (res says so), and cur and rev are the entry as written (nil when
// not fresh: the caller reads it).
func createMarked(ctx context.Context, store *sessions.Store, tr *transcripts.Store, e *sessions.Entry, enc string, res *ImportResult, msgs [][]byte) (cur *sessions.Entry, rev uint64, fresh bool, err error) {
	var count uint64
	if len(msgs) > 0 {
		if count, err = tr.Count(ctx, enc); err != nil {
			return nil, 0, false, fmt.Errorf("read transcript of %s: %w", e.Key, err)
		}
		e.SetImport(sessions.ImportMark{ID: res.ImportID, At: count, N: len(msgs)})
	}
	switch rev, err = store.Create(ctx, e); {
	case err == nil:
		res.Created = true
	case errors.Is(err, sessions.ErrExists):
		return nil, 0, false, nil
	default:
		return nil, 0, false, fmt.Errorf("create session %s: %w", e.Key, err)
	}
	if len(msgs) == 0 {
		return e, rev, true, nil
	}
	first, err := tr.AppendEachIfLen(ctx, enc, count, msgs...)
	if errors.Is(err, transcripts.ErrConflict) {
		// another writer moved the transcript since it was counted: the
		// mark is recorded, and appendOnce reconciles from there
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("append transcript of %s (run the same import again to finish it): %w", e.Key, err)
	}
	res.Imported, res.FirstEntry, res.Total = len(msgs), first, first+uint64(len(msgs))
	return e, rev, true, nil
}

// ImportID is the id Import gives the transcript in in (after the same
// checks), so ops can tell which import a session's mark belongs to.
func ImportID(in io.Reader) (string, error) {
	msgs, _, err := readTranscript(in, false)
	if err != nil {
		return "", bus.BadRequest(err.Error())
	}
	return importID(msgs), nil
}

// importID names a file by its entries, so the same file, whatever its
// name or blank lines, is recognised.
func importID(msgs [][]byte) string {
	h := sha256.New()
	for _, m := range msgs {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(m)))
		h.Write(n[:])
		h.Write(m)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// appendOnce appends msgs unless an earlier import of the same file did.
// Before anything is appended, the session entry records where the file's
// entries start (its import mark); a re-run compares the transcript from
// there with the file, byte for byte, and appends only what is missing. A
// crash anywhere leaves the mark, the appended prefix or both, and the next
// run finishes the job without doubling an entry. Appends are conditional on
// the transcript's length (AppendEachIfLen), so two identical imports running at
// once cannot both append the file: the one that loses a position re-reads,
// finds the other's entries equal to its own and appends only what is left.
//
// Another run of the same file may be appending it entry by entry while
// this one reads: each attempt that finds more of the file in place than
// the last is progress, and only attempts in a row that find none give up.
func appendOnce(ctx context.Context, store *sessions.Store, tr *transcripts.Store, key, enc string, res *ImportResult, msgs [][]byte) error {
	const stalls = 8
	best, stalled := -1, 0
	for {
		err := appendOnceTry(ctx, store, tr, key, enc, res, msgs)
		if err == nil || !errors.Is(err, transcripts.ErrConflict) {
			return err
		}
		if res.Present > best {
			best, stalled = res.Present, 0
		} else if stalled++; stalled == stalls {
			return err
		}
		// let the writer that got ahead go on before reading again
		if err := bus.Sleep(ctx, time.Duration(1+rand.IntN(8))*time.Millisecond); err != nil {
			return err
		}
	}
}

func appendOnceTry(ctx context.Context, store *sessions.Store, tr *transcripts.Store, key, enc string, res *ImportResult, msgs [][]byte) error {
	count, err := tr.Count(ctx, enc)
	if err != nil {
		return fmt.Errorf("read transcript of %s: %w", key, err)
	}
	var mark sessions.ImportMark
	_, _, err = store.Update(ctx, key, func(e *sessions.Entry) error {
		if m := e.Import(res.ImportID); m != nil {
			mark = *m
			return record.ErrUnchanged
		}
		mark = sessions.ImportMark{ID: res.ImportID, At: count, N: len(msgs)}
		e.SetImport(mark)
		return nil
	})
	if err != nil {
		return fmt.Errorf("record import in session %s: %w", key, err)
	}
	present := 0
	if mark.At < count {
		have, err := tr.Read(ctx, enc, mark.At, mark.At+uint64(len(msgs)))
		if err != nil {
			return fmt.Errorf("read transcript of %s: %w", key, err)
		}
		for present < len(have) && bytes.Equal(have[present].Data, msgs[present]) {
			present++
		}
	}
	res.Present, res.FirstEntry = present, mark.At
	if present == len(msgs) {
		res.Imported = 0
		return nil
	}
	end := mark.At + uint64(present)
	if end > count {
		// the transcript grew while it was read: another run of this
		// file is appending it
		return fmt.Errorf("%w: %s grew while it was read", transcripts.ErrConflict, key)
	}
	if end != count {
		if present > 0 {
			return fmt.Errorf("an earlier import of this file into %s stopped after %d of %d entries, and %d other entries were appended since: "+
				"import the file's remaining lines (from entry %d) as a new file", key, present, len(msgs), count-end, present+1)
		}
		// Nothing of the file landed where the mark says, and the
		// transcript moved on: the file starts at the end now.
		mark.At, end = count, count
		if _, _, err := store.Update(ctx, key, func(e *sessions.Entry) error { e.SetImport(mark); return nil }); err != nil {
			return fmt.Errorf("record import in session %s: %w", key, err)
		}
		res.FirstEntry = count
	}
	if _, err := tr.AppendEachIfLen(ctx, enc, end, msgs[present:]...); err != nil {
		if errors.Is(err, transcripts.ErrConflict) {
			return err
		}
		return fmt.Errorf("append transcript of %s (run the same import again to finish it): %w", key, err)
	}
	res.Imported = len(msgs) - present
	return nil
}

// readTranscript parses and checks every line, returning compact messages.
// Strict (stdin import): a bad line refuses the file. Lenient (an OpenClaw
// store): a line OpenClaw's own reader would pass over, such as the torn
// last line of a crash, is skipped and counted.
func readTranscript(in io.Reader, lenient bool) ([][]byte, int, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), importMaxLine)
	var out [][]byte
	skipped := 0
	for n := 1; sc.Scan(); n++ {
		msg, skip, err := transcriptLine(sc.Bytes(), n)
		switch {
		case err != nil && lenient:
			skipped++
		case err != nil:
			return nil, 0, err
		case skip:
			skipped++
		case msg != nil:
			out = append(out, msg)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("read transcript: %w", err)
	}
	return out, skipped, nil
}

// transcriptLine checks line n: a compact message, skip for a non-message
// event (session header, model change), nothing for a blank line.
func transcriptLine(raw []byte, n int) (msg []byte, skip bool, err error) {
	line := bytes.TrimSpace(raw)
	if len(line) == 0 {
		return nil, false, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, false, fmt.Errorf("line %d is not a JSON object (%v): %s", n, err, importLineFormat)
	}
	if t, ok := obj["type"]; ok {
		var typ string
		_ = json.Unmarshal(t, &typ)
		if typ != "message" {
			return nil, true, nil // session headers, model changes: not messages
		}
		inner, ok := obj["message"]
		if !ok {
			return nil, false, fmt.Errorf(`line %d has "type":"message" but no "message" object: %s`, n, importLineFormat)
		}
		if err := json.Unmarshal(inner, &obj); err != nil {
			return nil, false, fmt.Errorf("line %d: message is not a JSON object: %s", n, importLineFormat)
		}
		line = inner
	}
	var r string
	if err := json.Unmarshal(obj["role"], &r); err != nil || strings.TrimSpace(r) == "" {
		return nil, false, fmt.Errorf(`line %d has no "role" string: %s`, n, importLineFormat)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, line); err != nil {
		return nil, false, fmt.Errorf("line %d: %v", n, err)
	}
	return buf.Bytes(), false, nil
}

// ImportEntry loads one session from another store (an OpenClaw state
// directory): e is created as given, keeping its key, session id, labels,
// parents, routes and timestamps (an existing session of that key is left
// as it is), and its transcript is appended once under importID, so running
// the same import again appends only what the source gained since. Lines
// OpenClaw's reader would pass over are skipped (ImportResult.Skipped).
func ImportEntry(ctx context.Context, store *sessions.Store, tr *transcripts.Store, e *sessions.Entry, importID string, transcript io.Reader) (*ImportResult, error) {
	if err := rules.ValidateStoredKey(e.Key); err != nil {
		return nil, bus.Thrown(err)
	}
	msgs, skipped, err := readTranscript(transcript, true)
	if err != nil {
		return nil, fmt.Errorf("transcript of %s: %w", e.Key, err)
	}
	return importInto(ctx, store, tr, e, msgs, skipped, importID, 0)
}
