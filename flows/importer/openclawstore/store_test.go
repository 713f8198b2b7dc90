package openclawstore_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/flows/importer/openclawstore"
)

func TestMain(m *testing.M) { os.Exit(bustest.CheckLeaks(m.Run())) }

// The agent database of OpenClaw's SQLite store: the tables the import
// reads, with the columns OpenClaw declares (the rest of the schema,
// conversations, caches, memory index, is not read).
const agentSchema = `
CREATE TABLE sessions (
  session_id TEXT NOT NULL PRIMARY KEY,
  session_key TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  status TEXT,
  chat_type TEXT,
  channel TEXT,
  parent_session_key TEXT,
  spawned_by TEXT,
  display_name TEXT
) STRICT;
CREATE TABLE session_entries (
  session_key TEXT NOT NULL PRIMARY KEY,
  session_id TEXT NOT NULL,
  entry_json TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  status TEXT,
  FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE
) STRICT;
CREATE TABLE transcript_events (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_json TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, seq),
  FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE
) STRICT;
`

type dbSession struct {
	key, id string
	updated int64
	entry   map[string]any
	events  []string
}

// writeAgentDB writes an agent database as OpenClaw's SQLite store has it.
func writeAgentDB(t testing.TB, path string, ss []dbSession) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(agentSchema); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		entry, _ := json.Marshal(s.entry)
		if _, err := tx.Exec(`INSERT INTO sessions(session_id, session_key, created_at, updated_at) VALUES (?,?,?,?)`, s.id, s.key, s.updated, s.updated); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO session_entries(session_key, session_id, entry_json, updated_at) VALUES (?,?,?,?)`, s.key, s.id, string(entry), s.updated); err != nil {
			t.Fatal(err)
		}
		for i, ev := range s.events {
			if _, err := tx.Exec(`INSERT INTO transcript_events(session_id, seq, event_json, created_at) VALUES (?,?,?,?)`, s.id, i+1, ev, s.updated); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// fixtureState copies testdata/state (the file store of agent main) to a
// temp dir and adds agent ops in the SQLite store.
func fixtureState(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "state"))); err != nil {
		t.Fatal(err)
	}
	writeAgentDB(t, filepath.Join(dir, "agents", "ops", "agent", "openclaw-agent.sqlite"), []dbSession{
		{
			key: "agent:ops:main", id: "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", updated: 1764496850000,
			entry: map[string]any{"sessionId": "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", "updatedAt": 1764496850000, "label": "ops desk",
				"lastChannel": "slack", "deliveryContext": map[string]any{"channel": "slack", "to": "C042"}},
			events: []string{
				`{"type":"session","version":3,"id":"9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d","timestamp":"2025-11-30T09:40:00.000Z"}`,
				`{"type":"message","id":"o1","parentId":null,"timestamp":"2025-11-30T09:40:01.000Z","message":{"role":"user","content":[{"type":"text","text":"status of the deploy?"}],"timestamp":1764495601000}}`,
				"{\n  \"type\": \"message\", \"id\": \"o2\", \"parentId\": \"o1\",\n  \"message\": {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"Green.\"}]}\n}",
			},
		},
		{
			key: "agent:ops:hook:deploy", id: "11112222-3333-4444-8555-666677778888", updated: 1764496600000,
			entry: map[string]any{"updatedAt": 1764496600000},
		},
	})
	return dir
}

func TestOpenReadsBothLayouts(t *testing.T) {
	st, err := openclawstore.Open(fixtureState(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var keys []string
	for _, s := range st.Sessions {
		keys = append(keys, s.AgentID+" "+s.Key)
	}
	want := []string{
		"main agent:main:cron:nightly:run:5e6f",
		"main agent:main:main",
		"main agent:main:matrix:channel:!ops:[2001:db8::1]",
		"main agent:main:subagent:0b8e2f4a-3c1d-4e5f-8a9b-1c2d3e4f5a6b",
		"main agent:main:telegram:group:-100123:topic:7",
		"ops agent:ops:hook:deploy",
		"ops agent:ops:main",
	}
	if len(keys) != len(want) {
		t.Fatalf("sessions = %q, want %q", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("sessions = %q, want %q", keys, want)
		}
	}
	if _, err := openclawstore.Open(t.TempDir()); err == nil {
		t.Error("Open(a dir without agents/) succeeded")
	}
}
