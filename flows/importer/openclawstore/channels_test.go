package openclawstore_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sessionbus/sessionbus/flows/importer/openclawstore"
	"github.com/sessionbus/sessionbus/handlers/handlerstest"
)

// channelKeys are keys OpenClaw builds for Google Chat spaces, threads and
// users (ids with "/") and Signal groups (case-sensitive base64 with "+",
// "/" and "="), with the session id of each.
var channelKeys = map[string]string{
	"agent:chat:googlechat:group:spaces/AAAAx1b2c3":                                           "10000000-0000-4000-8000-000000000001",
	"agent:chat:googlechat:group:spaces/aaaax1b2c3:thread:spaces/aaaax1b2c3/threads/q1":       "10000000-0000-4000-8000-000000000002",
	"agent:chat:googlechat:direct:users/1234567890":                                           "10000000-0000-4000-8000-000000000003",
	"agent:chat:signal:group:q1W2e3R4t5Y6+/u7I8o9P0aSdFgHjKlZxCvBnM=":                         "10000000-0000-4000-8000-000000000004",
	"agent:chat:signal:group:Zm9vYmFy/YmF6+cXV4=:thread:ignored-by-signal-but-kept-as-stored": "10000000-0000-4000-8000-000000000005",
}

// orphanKey is a row OpenClaw treats as malformed (an empty agent id): it
// imports with the rest and is never listed.
const orphanKey = "agent::orphan"

func writeChannelState(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sdir := filepath.Join(dir, "agents", "chat", "sessions")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	store := map[string]any{}
	all := map[string]string{orphanKey: "10000000-0000-4000-8000-000000000009"}
	for k, id := range channelKeys {
		all[k] = id
	}
	n := int64(0)
	for k, id := range all {
		n++
		store[k] = map[string]any{"sessionId": id, "updatedAt": 1764496000000 + n, "chatType": "group"}
		lines := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2025-11-30T09:50:00.000Z"}
{"type":"message","id":"m1","parentId":null,"timestamp":"2025-11-30T09:50:01.000Z","message":{"role":"user","content":"hi from %s","timestamp":1764496201000}}
`, id, k)
		if err := os.WriteFile(filepath.Join(sdir, id+".jsonl"), []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(store)
	if err := os.WriteFile(filepath.Join(sdir, "sessions.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestImportGoogleChatAndSignalKeys: a state directory with Google Chat and
// Signal group keys imports whole (no --skip-invalid), sessions_list lists
// every one of them but the malformed row, and their histories read back.
func TestImportGoogleChatAndSignalKeys(t *testing.T) {
	s := handlerstest.Start(t, allVisible)
	dir := writeChannelState(t)
	st, err := openclawstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := s.Worker.Deps
	sum, err := openclawstore.Import(t.Context(), st, d.Store, d.Transcripts, openclawstore.Options{})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if sum.Sessions != len(channelKeys)+1 || len(sum.Invalid) != 0 {
		t.Fatalf("summary %+v, want all %d sessions imported", sum, len(channelKeys)+1)
	}
	if err := d.Index.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := s.MustCall("agent:chat:main", "sessions_list", `{}`)
	var listed []string
	rows, _ := res["sessions"].([]any)
	for _, r := range rows {
		listed = append(listed, r.(map[string]any)["key"].(string))
	}
	for k := range channelKeys {
		if !slices.Contains(listed, k) {
			t.Errorf("sessions_list leaves out %s: %v", k, listed)
		}
	}
	if slices.Contains(listed, orphanKey) || len(listed) != len(channelKeys) {
		t.Errorf("sessions_list = %v, want exactly the %d well-formed keys", listed, len(channelKeys))
	}
	if _, _, err := d.Store.Get(t.Context(), orphanKey); err != nil {
		t.Errorf("the malformed row was not imported: %v", err)
	}
	for k := range channelKeys {
		h := s.MustCall("agent:chat:main", "sessions_history", fmt.Sprintf(`{"sessionKey":%q}`, k))
		msgs, _ := h["messages"].([]any)
		if len(msgs) != 1 || h["sessionKey"] != k {
			t.Errorf("history of %s: %v", k, h)
		}
	}
}
