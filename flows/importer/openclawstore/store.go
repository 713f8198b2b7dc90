// Package openclawstore reads an OpenClaw state directory (~/.openclaw, or
// OPENCLAW_STATE_DIR): each agent's session store and transcripts, in
// either of the layouts OpenClaw has used.
//
//   - File store (OpenClaw's original layout): agents/<agentId>/sessions/sessions.json,
//     one JSON object mapping session keys to store entries, and one
//     transcript per session, <sessionId>.jsonl (or the entry's
//     sessionFile) beside it.
//   - SQLite store (OpenClaw's later "migrate runtime storage to sqlite"):
//     an agent database under agents/<agentId>/ with the tables
//     session_entries(session_key, session_id, entry_json, updated_at, …)
//     and transcript_events(session_id, seq, event_json, …), the same
//     entry and transcript event JSON as the files.
//
// When an agent has both, the SQLite store wins: OpenClaw's migration
// imports the files into it and keeps using only the database.
package openclawstore

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite"
)

// Session is one store entry and where its transcript is.
type Session struct {
	AgentID string
	Key     string
	// Entry is the store entry as OpenClaw wrote it (OpenClaw's field
	// names: sessionId, updatedAt, label, spawnedBy, deliveryContext, …).
	Entry json.RawMessage
	// Source names the store the session came from, for messages.
	Source string

	transcript func() (io.ReadCloser, error)
}

// Transcript opens the session's transcript as JSONL (OpenClaw's
// transcript events, one a line). A session without one reads as empty.
func (s *Session) Transcript() (io.ReadCloser, error) { return s.transcript() }

// Store is an opened state directory.
type Store struct {
	Dir      string
	Sessions []Session
	dbs      []*sql.DB
}

// Close releases the SQLite databases.
func (st *Store) Close() error {
	var errs []error
	for _, db := range st.dbs {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
}

// Open reads the session stores of every agent under dir (dir may be the
// state directory or its agents/ folder). Sessions come sorted by agent,
// then key, so two runs import in the same order.
func Open(dir string) (*Store, error) {
	agentsDir := filepath.Join(dir, "agents")
	if st, err := os.Stat(agentsDir); err != nil || !st.IsDir() {
		if filepath.Base(filepath.Clean(dir)) != "agents" {
			return nil, fmt.Errorf("%s is not an OpenClaw state directory: it has no agents/ folder (pass the directory that holds openclaw.json and agents/, usually ~/.openclaw)", dir)
		}
		agentsDir = dir
	}
	ents, err := os.ReadDir(agentsDir)
	if err != nil {
		return nil, err
	}
	st := &Store{Dir: dir}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		agentID := strings.ToLower(e.Name())
		adir := filepath.Join(agentsDir, e.Name())
		n, err := st.readSQLite(agentID, adir)
		if err != nil {
			st.Close()
			return nil, err
		}
		if n > 0 {
			continue
		}
		if err := st.readFiles(agentID, adir); err != nil {
			st.Close()
			return nil, err
		}
	}
	sort.SliceStable(st.Sessions, func(i, j int) bool {
		a, b := st.Sessions[i], st.Sessions[j]
		if a.AgentID != b.AgentID {
			return a.AgentID < b.AgentID
		}
		return a.Key < b.Key
	})
	return st, nil
}

// readFiles reads agents/<id>/sessions/sessions.json, if present.
func (st *Store) readFiles(agentID, adir string) error {
	sdir := filepath.Join(adir, "sessions")
	path := filepath.Join(sdir, "sessions.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s is not a JSON object of session entries: %v", path, err)
	}
	for key, raw := range m {
		var f struct {
			SessionID   string `json:"sessionId"`
			SessionFile string `json:"sessionFile"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			return fmt.Errorf("%s: entry %q is not a session entry object: %v", path, key, err)
		}
		tpath := transcriptPath(sdir, f.SessionID, f.SessionFile)
		st.Sessions = append(st.Sessions, Session{
			AgentID: agentID, Key: key, Entry: raw, Source: path,
			transcript: func() (io.ReadCloser, error) {
				if tpath == "" {
					return io.NopCloser(strings.NewReader("")), nil
				}
				fh, err := os.Open(tpath)
				if errors.Is(err, fs.ErrNotExist) {
					return io.NopCloser(strings.NewReader("")), nil
				}
				return fh, err
			},
		})
	}
	return nil
}

// transcriptPath finds a session's transcript file: its sessionFile when
// that exists (absolute, or relative to the sessions folder); else the same
// file name in this sessions folder (a moved or restored state directory
// keeps the old absolute paths, which OpenClaw re-roots the same way); else
// <sessionId>.jsonl.
func transcriptPath(sdir, sessionID, sessionFile string) string {
	if sessionFile != "" {
		p := sessionFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(sdir, p)
		}
		if fileExists(p) {
			return p
		}
		if p := filepath.Join(sdir, filepath.Base(sessionFile)); fileExists(p) {
			return p
		}
	}
	if sessionID == "" || strings.ContainsAny(sessionID, `/\`) {
		return ""
	}
	return filepath.Join(sdir, sessionID+".jsonl")
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// readSQLite reads every SQLite database under the agent's folder that
// holds a session_entries table, and returns how many sessions it found.
func (st *Store) readSQLite(agentID, adir string) (int, error) {
	var found int
	err := filepath.WalkDir(adir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(adir, p); strings.Count(rel, string(filepath.Separator)) >= 2 {
				return fs.SkipDir
			}
			return nil
		}
		if !isSQLiteFile(p) {
			return nil
		}
		n, err := st.readDB(agentID, p)
		found += n
		return err
	})
	return found, err
}

var sqliteMagic = []byte("SQLite format 3\x00")

func isSQLiteFile(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return bytes.Equal(head, sqliteMagic)
}

func (st *Store) readDB(agentID, path string) (int, error) {
	// Read-only and immutable-free: OpenClaw may be running on it (WAL).
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	var name string
	err = db.QueryRow(`SELECT name FROM sqlite_master WHERE type='table' AND name='session_entries'`).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		db.Close()
		return 0, nil
	}
	if err != nil {
		db.Close()
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	rows, err := db.Query(`SELECT session_key, session_id, entry_json, updated_at FROM session_entries`)
	if err != nil {
		db.Close()
		return 0, fmt.Errorf("read session_entries of %s: %w", path, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key, sid, entry string
		var updated int64
		if err := rows.Scan(&key, &sid, &entry, &updated); err != nil {
			db.Close()
			return 0, fmt.Errorf("read session_entries of %s: %w", path, err)
		}
		raw, err := withDefaults(entry, sid, updated)
		if err != nil {
			db.Close()
			return 0, fmt.Errorf("%s: session_entries row %q: %v", path, key, err)
		}
		st.Sessions = append(st.Sessions, Session{
			AgentID: agentID, Key: key, Entry: raw, Source: path,
			transcript: func() (io.ReadCloser, error) { return dbTranscript(db, sid) },
		})
		n++
	}
	if err := rows.Err(); err != nil {
		db.Close()
		return 0, fmt.Errorf("read session_entries of %s: %w", path, err)
	}
	st.dbs = append(st.dbs, db)
	return n, nil
}

// withDefaults fills sessionId and updatedAt from the row's columns when
// the entry JSON lacks them (the columns are the store's own copy).
func withDefaults(entry, sid string, updated int64) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(entry), &m); err != nil || m == nil {
		// Not an object: kept as is, and reported (with the session's key)
		// when the import converts it, with the store's other problems.
		return json.RawMessage(entry), nil
	}
	changed := false
	if _, ok := m["sessionId"]; !ok && sid != "" {
		m["sessionId"], changed = sid, true
	}
	if _, ok := m["updatedAt"]; !ok && updated > 0 {
		m["updatedAt"], changed = updated, true
	}
	if !changed {
		return json.RawMessage(entry), nil
	}
	return json.Marshal(m)
}

// dbTranscript streams a session's transcript_events, in seq order, as
// JSONL.
func dbTranscript(db *sql.DB, sessionID string) (io.ReadCloser, error) {
	rows, err := db.Query(`SELECT event_json FROM transcript_events WHERE session_id = ? ORDER BY seq`, sessionID)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer rows.Close()
		w := bufio.NewWriterSize(pw, 64<<10)
		for rows.Next() {
			var ev string
			if err := rows.Scan(&ev); err != nil {
				pw.CloseWithError(err)
				return
			}
			// One event a line: the JSON is compacted, so a pretty-printed
			// event cannot split across lines.
			var buf bytes.Buffer
			if err := json.Compact(&buf, []byte(ev)); err != nil {
				buf.Reset()
				buf.WriteString(strings.ReplaceAll(ev, "\n", " "))
			}
			buf.WriteByte('\n')
			if _, err := w.Write(buf.Bytes()); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		if err := rows.Err(); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(w.Flush())
	}()
	return pr, nil
}
