package openclawstore_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/flows/importer/openclawstore"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

func importFixture(t *testing.T, s *handlerstest.Stack, dir string) *openclawstore.Summary {
	t.Helper()
	st, err := openclawstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := s.Worker.Deps
	sum, err := openclawstore.Import(t.Context(), st, d.Store, d.Transcripts, openclawstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Index.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return sum
}

func allVisible(c *config.Config) {
	c.Tools.Sessions.Visibility = "all"
	c.Tools.AgentToAgent.Enabled = true
}

// The reference's sessions_list for the fixture store, as its rules give it
// ([B] row contract): cron run keys are not listed; rows sorted by updatedAt,
// newest first; kind from the key's class (main, subagent → other, channel
// and group chats → group, hook); channel from the entry, then
// origin/lastChannel/deliveryContext, "internal" for hooks, else "unknown";
// the explicit parent; visible children; no stateVersion while it is 0.
const wantList = `{
 "count": 6,
 "hasMore": false,
 "limitApplied": 100,
 "sessions": [
  {"agentId": "main", "archived": false, "channel": "unknown", "key": "agent:main:subagent:0b8e2f4a-3c1d-4e5f-8a9b-1c2d3e4f5a6b",
   "kind": "other", "label": "research", "parentSessionKey": "agent:main:main", "pinned": false,
   "sessionId": "0b8e2f4a-3c1d-4e5f-8a9b-1c2d3e4f5a6b", "status": "done", "updatedAt": 1764497000000},
  {"agentId": "main", "archived": false, "channel": "telegram", "childSessions": ["agent:main:subagent:0b8e2f4a-3c1d-4e5f-8a9b-1c2d3e4f5a6b"],
   "contextTokens": 128000, "displayName": "Ada (Telegram)", "key": "agent:main:main", "kind": "main", "label": "home",
   "model": "gpt-4.1", "pinned": false, "sessionId": "6f1c2a9e-5b7d-4c1e-9a3f-0d2b8e4c7a10", "totalTokens": 160, "updatedAt": 1764496900000},
  {"agentId": "ops", "archived": false, "channel": "slack", "key": "agent:ops:main", "kind": "main", "label": "ops desk",
   "pinned": false, "sessionId": "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", "updatedAt": 1764496850000},
  {"agentId": "main", "archived": false, "channel": "matrix", "key": "agent:main:matrix:channel:!ops:[2001:db8::1]", "kind": "group",
   "pinned": false, "sessionId": "a4d5e6f7-0819-4a2b-bc3d-4e5f60718293", "updatedAt": 1764496800000},
  {"agentId": "main", "archived": false, "channel": "telegram", "key": "agent:main:telegram:group:-100123:topic:7", "kind": "group",
   "pinned": false, "sessionId": "c0ffee00-1111-4222-8333-444455556666", "updatedAt": 1764496700000},
  {"agentId": "ops", "archived": false, "channel": "internal", "key": "agent:ops:hook:deploy", "kind": "hook",
   "pinned": false, "sessionId": "11112222-3333-4444-8555-666677778888", "updatedAt": 1764496600000}
 ]
}`

// The reference's sessions_history of agent:main:main: the session header,
// model change and the torn last line are not messages; the toolResult is
// left out (no includeTools); usage is a heavy field, removed (so
// contentTruncated); the sk- key is masked to its first 6 and last 4
// characters; bytes is the compact JSON size of messages.
const wantHistory = `{
 "bytes": 420,
 "contentRedacted": true,
 "contentTruncated": true,
 "droppedMessages": false,
 "messages": [
  {"content": [{"text": "plan the release", "type": "text"}], "role": "user", "timestamp": 1764496801000},
  {"api": "openai-responses", "content": [{"text": "Draft plan. Use the key sk-liv…fXYZ for the deploy.", "type": "text"}],
   "model": "gpt-4.1", "provider": "openai", "role": "assistant", "stopReason": "stop", "timestamp": 1764496805000},
  {"content": [{"text": "Done: tests pass.", "type": "text"}], "role": "assistant", "timestamp": 1764496807000}
 ],
 "sessionKey": "agent:main:main",
 "truncated": true
}`

// From the SQLite store: a pretty-printed event is one entry.
const wantOpsHistory = `{
 "bytes": 167,
 "contentRedacted": false,
 "contentTruncated": false,
 "droppedMessages": false,
 "messages": [
  {"content": [{"text": "status of the deploy?", "type": "text"}], "role": "user", "timestamp": 1764495601000},
  {"content": [{"text": "Green.", "type": "text"}], "role": "assistant"}
 ],
 "sessionKey": "agent:ops:main",
 "truncated": false
}`

func sameJSON(t *testing.T, what string, got map[string]any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad expectation: %v", what, err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		pretty, _ := json.MarshalIndent(got, "", " ")
		t.Errorf("%s:\n got %s\nwant %s", what, pretty, want)
	}
}

// The imported store answers sessions_list and sessions_history as the
// reference does for the same store.
func TestImportedStoreMatchesReference(t *testing.T) {
	s := handlerstest.Start(t, allVisible)
	sum := importFixture(t, s, fixtureState(t))
	if sum.Agents != 2 || sum.Sessions != 7 || sum.Created != 7 || sum.Imported != 10 || sum.Present != 0 || len(sum.Invalid)+len(sum.Failed) != 0 {
		t.Fatalf("summary = %+v", sum)
	}
	sameJSON(t, "sessions_list", s.MustCall("agent:main:main", "sessions_list", `{}`), wantList)
	sameJSON(t, "sessions_history agent:main:main", s.MustCall("agent:main:main", "sessions_history", `{"sessionKey":"agent:main:main"}`), wantHistory)
	sameJSON(t, "sessions_history agent:ops:main", s.MustCall("agent:main:main", "sessions_history", `{"sessionKey":"agent:ops:main"}`), wantOpsHistory)
	// A session id from the store resolves to its key, as in the reference.
	h := s.MustCall("agent:main:main", "sessions_history", `{"sessionKey":"a4d5e6f7-0819-4a2b-bc3d-4e5f60718293"}`)
	if h["sessionKey"] != "agent:main:matrix:channel:!ops:[2001:db8::1]" || len(h["messages"].([]any)) != 2 {
		t.Errorf("history by session id (transcript found by its re-rooted sessionFile) = %v", h)
	}
	// Routes, parents and timestamps the list no longer shows are kept.
	d := s.Worker.Deps
	e, _, err := d.Store.Get(t.Context(), "agent:main:telegram:group:-100123:topic:7")
	if err != nil {
		t.Fatal(err)
	}
	if e.DeliveryContext == nil || e.DeliveryContext.To != "-100123" || e.DeliveryContext.ThreadID != "7" || e.LastThreadID() != "7" ||
		e.Origin == nil || e.Origin.ThreadID != "7" || e.LastTo != "-100123" || e.CreatedAt != 1764496700000 {
		t.Errorf("telegram topic entry = %+v (origin %+v, delivery %+v)", e, e.Origin, e.DeliveryContext)
	}
	c, _, err := d.Store.Get(t.Context(), "agent:main:subagent:0b8e2f4a-3c1d-4e5f-8a9b-1c2d3e4f5a6b")
	if err != nil {
		t.Fatal(err)
	}
	if c.SpawnedBy != "agent:main:main" || c.SpawnDepth == nil || *c.SpawnDepth != 1 || c.StartedAt != 1764496950000 ||
		c.EndedAt != 1764496990000 || c.CreatedAt != 1764496950000 || c.Rares().SubagentRole != "leaf" {
		t.Errorf("sub-agent entry = %+v", c)
	}
}

// Running the same import again appends nothing; after OpenClaw appended to
// a transcript, it appends just that.
func TestImportAgainAppendsOnlyWhatIsNew(t *testing.T) {
	s := handlerstest.Start(t, allVisible)
	dir := fixtureState(t)
	importFixture(t, s, dir)
	again := importFixture(t, s, dir)
	if again.Created != 0 || again.Imported != 0 || again.Present != 10 {
		t.Fatalf("second run = %+v, want nothing new", again)
	}
	f, err := os.OpenFile(filepath.Join(dir, "agents", "main", "sessions", "0b8e2f4a-3c1d-4e5f-8a9b-1c2d3e4f5a6b.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(`{"type":"message","id":"s3","parentId":"s2","message":{"role":"user","content":"and the dates?"}}` + "\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	third := importFixture(t, s, dir)
	if third.Imported != 1 || third.Present != 10 {
		t.Fatalf("after OpenClaw appended one line: %+v, want 1 appended", third)
	}
	h := s.MustCall("agent:main:main", "sessions_history", `{"sessionKey":"agent:main:subagent:0b8e2f4a-3c1d-4e5f-8a9b-1c2d3e4f5a6b"}`)
	if n := len(h["messages"].([]any)); n != 3 {
		t.Errorf("sub-agent history has %d messages, want 3", n)
	}
}

// A store with a key sessionbus cannot hold is refused before anything is
// written; with SkipInvalid the others are imported.
func TestImportRefusesInvalidStoreWritingNothing(t *testing.T) {
	s := handlerstest.Start(t, allVisible)
	dir := fixtureState(t)
	writeAgentDB(t, filepath.Join(dir, "agents", "bad", "agent", "db.sqlite"), []dbSession{
		{key: "agent:bad:with space", id: "22223333-4444-4555-8666-777788889999", updated: 1, entry: map[string]any{}},
		{key: "agent:bad:broken", id: "33334444-5555-4666-8777-888899990000", updated: 1, entry: nil},
	})
	st, err := openclawstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := s.Worker.Deps
	_, err = openclawstore.Import(t.Context(), st, d.Store, d.Transcripts, openclawstore.Options{})
	if !errors.Is(err, openclawstore.ErrInvalid) || !strings.Contains(err.Error(), "agent:bad:with space") ||
		!strings.Contains(err.Error(), "whitespace") || !strings.Contains(err.Error(), "--skip-invalid") {
		t.Fatalf("Import = %v, want ErrInvalid naming the key", err)
	}
	if err := d.Index.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := d.Index.Len(); n != 0 {
		t.Fatalf("a refused import wrote %d sessions", n)
	}
	sum, err := openclawstore.Import(t.Context(), st, d.Store, d.Transcripts, openclawstore.Options{SkipInvalid: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Sessions != 7 || len(sum.Invalid) != 2 || sum.Invalid[0].Key != "agent:bad:broken" ||
		sum.Invalid[0].Error != "store entry is not a JSON object" || sum.Invalid[1].Key != "agent:bad:with space" {
		t.Fatalf("summary = %+v, want the 7 good sessions imported and the 2 bad ones listed", sum)
	}
}

// TestImportOfNewSessionsWritesEachTwice: a session new to sessionbus is
// created carrying its import mark and marked done after its append, two
// writes of its entry (one without a transcript); recording the mark in an
// update of its own cost a synced write more per session.
func TestImportOfNewSessionsWritesEachTwice(t *testing.T) {
	s := handlerstest.Start(t, allVisible)
	d := s.Worker.Deps
	lastSeq := func() uint64 {
		t.Helper()
		st, err := d.Store.KV().Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq
	}
	before := lastSeq()
	sum := importFixture(t, s, fixtureState(t))
	if sum.Created != 7 || sum.Imported != 10 {
		t.Fatalf("summary = %+v", sum)
	}
	// four of the seven have a transcript: created with the mark, then
	// marked done; the other three are only created
	const withTranscript = 4
	if writes, want := lastSeq()-before, uint64(sum.Created+withTranscript); writes != want {
		t.Fatalf("%d writes of the session entries for %d new sessions, want %d", writes, sum.Created, want)
	}
	e, _, err := d.Store.Get(t.Context(), "agent:main:main")
	if err != nil {
		t.Fatal(err)
	}
	m := e.Import(openclawstore.ImportID("main", e.SessionID))
	if m == nil || !m.Done || m.At != 0 || m.N != 4 {
		t.Fatalf("import mark of agent:main:main = %+v", m)
	}
	// and the import stays idempotent: a second run writes no entry
	before = lastSeq()
	if again := importFixture(t, s, fixtureState(t)); again.Created != 0 || again.Imported != 0 || again.Present != 10 {
		t.Fatalf("second run = %+v", again)
	}
	if writes := lastSeq() - before; writes != 0 {
		t.Fatalf("a second run wrote the session entries %d times", writes)
	}
}
