package search

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite with FTS5: no cgo in the binary

	"github.com/sessionbus/sessionbus/kv/archives"
)

// schemaVersion names the layout below; an index file of another version
// is rebuilt, never migrated (the stream holds everything it is made of).
const schemaVersion = "2"

// schema: fts holds the searchable text under rowid = the entry's stream
// sequence (FTS5 keeps its own copy, which snippet() reads); entries the
// facts filters and results need; sess what the sessions bucket says of
// each key (filters, sessionId); floors the sequence below which a key's
// entries were purged (a delete or reset), so an entry fetched before the
// purge and applied after it is not indexed; meta the applied sequence.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS entries(seq INTEGER PRIMARY KEY, key TEXT NOT NULL, agent TEXT NOT NULL, n INTEGER NOT NULL, role TEXT NOT NULL, ts INTEGER NOT NULL, archive TEXT NOT NULL DEFAULT '')`,
	`CREATE TABLE IF NOT EXISTS archives(id TEXT PRIMARY KEY, key TEXT NOT NULL, session_id TEXT NOT NULL, at INTEGER NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS entries_key ON entries(key, seq)`,
	`CREATE TABLE IF NOT EXISTS sess(key TEXT PRIMARY KEY, session_id TEXT NOT NULL, channel TEXT NOT NULL, kind TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS floors(key TEXT PRIMARY KEY, seq INTEGER NOT NULL)`,
	`CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, tokenize='unicode61 remove_diacritics 2')`,
}

// Index is the SQLite full-text index of one indexer. One goroutine
// writes (the indexer's loop); searches read concurrently (WAL).
type Index struct {
	db   *sql.DB
	path string
}

// Row is one indexed entry.
type Row struct {
	Seq   uint64
	Key   string
	Agent string
	N     uint64
	Role  string
	TS    int64 // unix milliseconds the stream stored the entry
	Text  string

	stored time.Time // when the stream stored it (Options.Observe)
}

// Session is what the sessions bucket says of one key.
type Session struct {
	Key, SessionID, Channel, Kind string
}

// OpenIndex opens (creating) the index file at path; a file of another
// layout is emptied.
func OpenIndex(path string) (*Index, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("search index dir: %w", err)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(0)&_pragma=cache_size(-16384)&_pragma=temp_store(memory)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open search index %s: %w", path, err)
	}
	ix := &Index{db: db, path: path}
	if err := ix.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open search index %s: %w (remove the file to rebuild it from the stream)", path, err)
	}
	return ix, nil
}

func (ix *Index) init() error {
	var v string
	err := ix.db.QueryRow(`SELECT v FROM meta WHERE k='version'`).Scan(&v)
	if err == nil && v == schemaVersion {
		return nil
	}
	if err == nil { // another layout: start over
		for _, t := range []string{"meta", "entries", "sess", "floors", "fts", "archives"} {
			if _, err := ix.db.Exec(`DROP TABLE IF EXISTS ` + t); err != nil {
				return err
			}
		}
	}
	tx, err := ix.db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, s := range schema {
		if _, err := tx.Exec(s); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`INSERT OR REPLACE INTO meta(k, v) VALUES('version', ?)`, schemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the file.
func (ix *Index) Close() error { return ix.db.Close() }

// Path is the index file.
func (ix *Index) Path() string { return ix.path }

// meta is a meta value, "" when unset.
func (ix *Index) meta(k string) (string, error) {
	var v string
	err := ix.db.QueryRow(`SELECT v FROM meta WHERE k=?`, k).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read search index %s: %w", k, err)
	}
	return v, nil
}

func (ix *Index) setMeta(k, v string) error {
	_, err := ix.db.Exec(`INSERT OR REPLACE INTO meta(k, v) VALUES(?, ?)`, k, v)
	return err
}

func (ix *Index) metaInt(k string) (uint64, error) {
	var v string
	err := ix.db.QueryRow(`SELECT v FROM meta WHERE k=?`, k).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read search index %s: %w", k, err)
	}
	return strconv.ParseUint(v, 10, 64)
}

// Applied is the last stream sequence whose entry the index holds (or
// skipped): the next load starts after it.
func (ix *Index) Applied() (uint64, error) { return ix.metaInt("applied") }

// Complete reports that the index once caught up with the stream: until
// then it is being (re)built and searches are refused with progress.
func (ix *Index) Complete() (bool, error) {
	v, err := ix.metaInt("complete")
	return v == 1, err
}

// Floors is every key's purge floor.
func (ix *Index) Floors() (map[string]uint64, error) {
	rows, err := ix.db.Query(`SELECT key, seq FROM floors`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var k string
		var s uint64
		if err := rows.Scan(&k, &s); err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, rows.Err()
}

// EachSession calls fn with each session the index has facts for, in no
// order: the writer's marks are made from them at start, and the sweep of
// sessions deleted while no indexer ran reads their keys.
func (ix *Index) EachSession(fn func(Session)) error {
	rows, err := ix.db.Query(`SELECT key, session_id, channel, kind FROM sess`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s Session
		if err := rows.Scan(&s.Key, &s.SessionID, &s.Channel, &s.Kind); err != nil {
			return err
		}
		fn(s)
	}
	return rows.Err()
}

// Batch is what one transaction applies: entries up to the stream
// sequence Applied, session facts, purges (a key's entries below a
// sequence), and the complete mark.
type Batch struct {
	Rows     []Row
	Applied  uint64 // 0: unchanged
	Sessions []Session
	Gone     []string          // keys whose facts are gone (deleted sessions)
	Purges   map[string]uint64 // key -> entries below this sequence leave
	Complete bool

	// watched: the sessions watch's initial values are all in with this
	// batch (the indexer's own state, not stored).
	watched bool
}

func (b *Batch) empty() bool {
	return len(b.Rows) == 0 && b.Applied == 0 && len(b.Sessions) == 0 && len(b.Gone) == 0 && len(b.Purges) == 0 && !b.Complete
}

// Apply writes b in one transaction: the rows and the applied sequence
// land together or not at all, so a process killed mid-batch resumes
// after the last batch that committed, with no entry lost or doubled.
func (ix *Index) Apply(ctx context.Context, b *Batch) error {
	if b.empty() {
		return nil
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := applyRows(ctx, tx, b.Rows, ""); err != nil {
		return err
	}
	for k, below := range b.Purges {
		if err := purge(ctx, tx, k, below); err != nil {
			return err
		}
	}
	for _, s := range b.Sessions {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO sess(key, session_id, channel, kind) VALUES(?,?,?,?)`, s.Key, s.SessionID, s.Channel, s.Kind); err != nil {
			return err
		}
	}
	for _, k := range b.Gone {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sess WHERE key=?`, k); err != nil {
			return err
		}
	}
	if b.Applied > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta(k, v) VALUES('applied', ?)`, strconv.FormatUint(b.Applied, 10)); err != nil {
			return err
		}
	}
	if b.Complete {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta(k, v) VALUES('complete', '1')`); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// applyRows indexes rows under their Seq, each once; archive names the
// archive they came from ("" for the stream's).
func applyRows(ctx context.Context, tx *sql.Tx, rows []Row, archive string) error {
	if len(rows) == 0 {
		return nil
	}
	ins, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO entries(seq, key, agent, n, role, ts, archive) VALUES(?,?,?,?,?,?,?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	txt, err := tx.PrepareContext(ctx, `INSERT INTO fts(rowid, text) VALUES(?,?)`)
	if err != nil {
		return err
	}
	defer txt.Close()
	for _, r := range rows {
		res, err := ins.ExecContext(ctx, int64(r.Seq), r.Key, r.Agent, r.N, r.Role, r.TS, archive)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // already indexed: a sequence is applied once
		}
		if _, err := txt.ExecContext(ctx, int64(r.Seq), r.Text); err != nil {
			return err
		}
	}
	return nil
}

// purge removes key's entries below the sequence below and records the
// floor.
// An archive's rows (negative sequences) stay: they leave with the archive.
func purge(ctx context.Context, tx *sql.Tx, key string, below uint64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM fts WHERE rowid IN (SELECT seq FROM entries WHERE key=? AND seq>0 AND seq<?)`, key, below); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE key=? AND seq>0 AND seq<?`, key, below); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO floors(key, seq) VALUES(?,?) ON CONFLICT(key) DO UPDATE SET seq=max(seq, excluded.seq)`, key, below)
	return err
}

// Count is how many of the stream's entries the index holds.
func (ix *Index) Count(ctx context.Context) (int64, error) {
	var n int64
	err := ix.db.QueryRowContext(ctx, `SELECT count(*) FROM entries WHERE seq>0`).Scan(&n)
	return n, err
}

// Bytes is the size of the index on disk (the file and its write-ahead
// log).
func (ix *Index) Bytes() int64 {
	var n int64
	for _, p := range []string{ix.path, ix.path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// archiveIDs is every archive whose entries the index holds.
func (ix *Index) archiveIDs(ctx context.Context) (map[string]bool, error) {
	rows, err := ix.db.QueryContext(ctx, `SELECT id FROM archives`)
	if err != nil {
		return nil, fmt.Errorf("read search index archives: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// addArchive indexes one archive's rows in one transaction, under
// sequences below every one the index holds.
func (ix *Index) addArchive(ctx context.Context, m *archives.Meta, rows []Row) error {
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var lowest int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(min(seq), 0) FROM entries`).Scan(&lowest); err != nil {
		return err
	}
	next := min(lowest, 0)
	for i := range rows { // below every sequence held: an archive's rows count down
		next--
		rows[i].Seq = uint64(next)
	}
	if err := applyRows(ctx, tx, rows, m.ID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO archives(id, key, session_id, at) VALUES(?,?,?,?)`, m.ID, m.Key, m.SessionID, m.At); err != nil {
		return err
	}
	return tx.Commit()
}

// dropArchive removes a deleted archive's rows.
func (ix *Index) dropArchive(ctx context.Context, id string) error {
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, q := range []string{
		`DELETE FROM fts WHERE rowid IN (SELECT seq FROM entries WHERE archive=? AND seq<0)`,
		`DELETE FROM entries WHERE archive=? AND seq<0`,
		`DELETE FROM archives WHERE id=?`,
	} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return err
		}
	}
	return tx.Commit()
}
