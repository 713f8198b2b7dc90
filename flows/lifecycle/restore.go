package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/kv/archives"
	"github.com/sessionbus/sessionbus/kv/sessions"
	"github.com/sessionbus/sessionbus/streams/transcripts"
)

// Restore brings an archive (by id, session key or sessionId) back as a
// live session under its key, with a new sessionId (the archive keeps the
// old one, and stays). It refuses when the key has a live session. The
// transcript is appended before the entry is written; a restore that
// stopped half way is finished by running it again (what is already
// there is compared, byte for byte, with the archive's first entries).
func (o *Ops) Restore(ctx context.Context, keyOrID string, progress archives.Progress) (*Result, error) {
	m, err := o.Archives.Find(ctx, keyOrID)
	if errors.Is(err, archives.ErrNotFound) {
		return nil, bus.Errorf(bus.CodeNotFound, "%v", err)
	}
	if err != nil {
		return nil, err
	}
	if cur, _, err := o.Sessions.Get(ctx, m.Key); err == nil {
		return nil, bus.Errorf(bus.CodeBadRequest,
			"session %s exists (sessionId %s): restore never overwrites a live session; delete or reset it first (its transcript is archived then), and restore again",
			m.Key, cur.SessionID)
	} else if !errors.Is(err, sessions.ErrNotFound) {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := o.Archives.Read(ctx, m.ID, &buf); err != nil {
		return nil, err
	}
	lines := bytes.SplitAfter(buf.Bytes(), []byte("\n"))
	entries := make([][]byte, 0, len(lines))
	for _, l := range lines {
		if l = bytes.TrimSuffix(l, []byte("\n")); len(l) > 0 {
			entries = append(entries, l)
		}
	}
	enc := bus.EncodeKey(m.Key)
	have, err := o.Transcripts.Read(ctx, enc, 0, uint64(len(entries))+1)
	if err != nil {
		return nil, err
	}
	if len(have) > len(entries) || !isPrefix(have, entries) {
		return nil, bus.Errorf(bus.CodeBadRequest,
			"session %s has no entry but its transcript holds %d entries that are not this archive's: nothing restored; delete the key's leftovers with `sessionbus session delete` after creating it, or restore another archive",
			m.Key, len(have))
	}
	for from := len(have); from < len(entries); from += transcripts.MaxBatch {
		to := min(from+transcripts.MaxBatch, len(entries))
		if _, err := o.Transcripts.Append(ctx, enc, entries[from:to]...); err != nil {
			return nil, fmt.Errorf("restore %s: append transcript (run the restore again to finish it): %w", m.Key, err)
		}
		if progress != nil {
			progress(to)
		}
	}
	e := &sessions.Entry{Key: m.Key, AgentID: m.AgentID}
	if len(m.Entry) > 0 {
		if err := json.Unmarshal(m.Entry, e); err != nil {
			return nil, fmt.Errorf("restore %s: the archive's session entry does not decode: %w", m.Key, err)
		}
	}
	e.Key, e.SessionID = m.Key, sessions.NewID()
	e.UpdatedAt = o.now().UnixMilli()
	e.SetRare(func(r *sessions.RareFields) { r.Imports = nil })
	if _, err := o.Sessions.Create(ctx, e); errors.Is(err, sessions.ErrExists) {
		return nil, bus.Errorf(bus.CodeBadRequest, "session %s was created while it was being restored: its transcript now starts with the archive's entries; check it", m.Key)
	} else if err != nil {
		return nil, fmt.Errorf("restore %s: create entry (run the restore again to finish it): %w", m.Key, err)
	}
	o.log().Info("lifecycle: session restored", "key", m.Key, "archive", m.ID, "entries", len(entries), "sessionId", e.SessionID)
	return &Result{Op: "restore", Key: m.Key, SessionID: m.SessionID, NewSessionID: e.SessionID, ArchiveID: m.ID,
		Entries: len(entries), Bytes: m.Bytes, Compressed: m.Compressed}, nil
}

func isPrefix(have []transcripts.Entry, want [][]byte) bool {
	for i, h := range have {
		if !bytes.Equal(h.Data, want[i]) {
			return false
		}
	}
	return true
}
