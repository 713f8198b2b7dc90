package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestLifecycleCLI runs the commands docs/ops.md ("Lifecycle and
// archives") gives, against `sessionbus serve`: session delete|reset,
// archive ls|get|restore|budget, the same request with the nats CLI, and
// `nats obj ls|info|get` on the archives store; and their refusals.
func TestLifecycleCLI(t *testing.T) {
	sb, nats := binary(t, "sessionbus"), binary(t, "nats")
	data := t.TempDir()
	srv := start(t, "serve", "--data", data, "--listen", anyPort)
	url, _ := srv.ready(t)
	creds := filepath.Join(data, "operator.creds")
	key := "agent:main:demo"
	// sbRun runs sessionbus with --server and --creds after
	// the subcommand's words and before its one positional argument, if
	// the last arg is one (a key or an archive id)
	sbRun := func(stdin string, args ...string) (string, string, int) {
		words := 1
		if args[0] == "session" || args[0] == "archive" {
			words = 2
		}
		flags := []string{"--server", url, "--creds", creds}
		words = min(words, len(args))
		full := append(append(append([]string{}, args[:words]...), flags...), args[words:]...)
		return run(t, stdin, sb, full...)
	}

	first := "{\"role\":\"user\",\"content\":\"first incarnation\"}\n{\"role\":\"assistant\",\"content\":\"ok\"}\n"
	second := "{\"role\":\"user\",\"content\":\"second incarnation\"}\n"
	if _, errOut, code := sbRun(first, "import", key); code != 0 {
		t.Fatalf("import: %s", errOut)
	}

	// refusals change nothing
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"session"}, 2, "usage: sessionbus session delete|reset"},
		{[]string{"session", "delete"}, 2, "usage"},
		{[]string{"session", "delete", "agent:main:nobody"}, 1, `unknown session key \"agent:main:nobody\"`},
		{[]string{"session", "reset", "agent:main:a b"}, 1, "is invalid"},
		{[]string{"archive", "restore", key}, 1, "no archive has id, session key or sessionId"},
		{[]string{"archive"}, 2, "usage: sessionbus archive"},
		{[]string{"archive", "get"}, 2, "usage"},
	} {
		_, errOut, code := sbRun("", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%v: code %d stderr %s", tc.args, code, errOut)
		}
	}
	if out, _, _ := sbRun("", "archive", "ls", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("refusals archived something: %s", out)
	}

	// reset, import a second incarnation, delete
	out, errOut, code := sbRun("", "session", "reset", key)
	var res struct {
		SessionID, NewSessionID, ArchiveID string
		Entries                            int
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.NewSessionID == "" || res.Entries != 2 || !strings.Contains(errOut, "reset "+key+": archived 2 entries") {
		t.Fatalf("session reset: %d %s %s", code, out, errOut)
	}
	resetArchive := res.ArchiveID
	if _, errOut, code := sbRun(second, "import", key); code != 0 {
		t.Fatalf("import after reset: %s", errOut)
	}
	out, errOut, code = sbRun("", "session", "delete", key)
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Entries != 1 {
		t.Fatalf("session delete: %d %s %s", code, out, errOut)
	}

	out, errOut, code = sbRun("", "archive", "ls")
	if code != 0 || strings.Count(out, key) != 2 || !strings.Contains(out, "reset") || !strings.Contains(out, "deleted") || !strings.Contains(errOut, "disk budget 10737418240 bytes") {
		t.Fatalf("archive ls: %s %s", out, errOut)
	}
	out, _, code = sbRun("", "archive", "ls", "--agent", "main", "--json")
	var metas []struct{ ID, Key, Reason, State string }
	if code != 0 || json.Unmarshal([]byte(out), &metas) != nil || len(metas) != 2 || metas[0].Reason != "reset" || metas[1].Reason != "deleted" || metas[1].State != "done" {
		t.Fatalf("archive ls --json: %s", out)
	}
	if out, _, _ := sbRun("", "archive", "ls", "--agent", "other", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("archive ls --agent other: %s", out)
	}
	// get: by key the newest, by id any; byte for byte the JSONL
	if out, _, code := sbRun("", "archive", "get", key); code != 0 || out != second {
		t.Fatalf("archive get key: %q", out)
	}
	if out, errOut, code := sbRun("", "archive", "get", resetArchive); code != 0 || out != first {
		t.Fatalf("archive get id %s: %d %q %s", resetArchive, code, out, errOut)
	}

	// restore, then restore again onto the live session: refused
	out, errOut, code = sbRun("", "archive", "restore", key)
	if code != 0 || !strings.Contains(out, `"entries": 1`) {
		t.Fatalf("archive restore: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := sbRun("", "archive", "restore", key); code != 1 || !strings.Contains(errOut, "restore never overwrites a live session") {
		t.Fatalf("restore onto a live session: %d %s", code, errOut)
	}
	out, _, code = sbRun("", "archive", "budget")
	var b struct {
		Enabled bool
		Limit   int64
		Used    int64
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || !b.Enabled || b.Limit != 10<<30 || b.Used <= 0 {
		t.Fatalf("archive budget: %s", out)
	}
	out, errOut, code = sbRun("", "inspect")
	if code != 0 || !strings.Contains(out, "ARCHIVES\n  disk budget 10737418240 bytes: used ") {
		t.Fatalf("inspect shows no disk budget: %d %s %s", code, out, errOut)
	}

	// the same request with the stock nats CLI and an ops token
	tok, _, code := run(t, "", sb, "token", "--creds", creds, "--adapter", "*")
	if code != 0 {
		t.Fatal("token --adapter '*'")
	}
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", filepath.Join(data, "creds", "admin.creds"), "req", "sb.ops.session.delete", `{"sessionKey":"agent:main:demo"}`, "-H", "Sessionbus-Token:"+strings.TrimSpace(tok), "--raw")
	if code != 0 || !strings.Contains(out, `"op":"delete"`) || !strings.Contains(out, `"entries":1`) {
		t.Fatalf("nats req sb.ops.session.delete: %d %s %s", code, out, errOut)
	}

	// nats obj on the same store
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", filepath.Join(data, "creds", "ops.creds"), "--js-api-prefix", "sb.ops.js", "obj", "ls", "archives")
	if code != 0 || !strings.Contains(out, resetArchive) {
		t.Fatalf("nats obj ls archives: %d %s %s", code, out, errOut)
	}
	out, _, code = run(t, "", nats, "-s", url, "--creds", filepath.Join(data, "creds", "ops.creds"), "--js-api-prefix", "sb.ops.js", "obj", "info", "archives", resetArchive)
	if code != 0 || !strings.Contains(out, "zstd") || !strings.Contains(out, key) {
		t.Fatalf("nats obj info: %s", out)
	}
	zst := filepath.Join(t.TempDir(), "demo.jsonl.zst")
	if _, errOut, code := run(t, "", nats, "-s", url, "--creds", filepath.Join(data, "creds", "ops.creds"), "--js-api-prefix", "sb.ops.js", "obj", "get", "archives", resetArchive, "-O", zst); code != 0 {
		t.Fatalf("nats obj get: %s", errOut)
	}
	raw, err := os.ReadFile(zst)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var plain bytes.Buffer
	if _, err := plain.ReadFrom(dec); err != nil || plain.String() != first {
		t.Fatalf("zstd -d of nats obj get: %q %v", plain.String(), err)
	}
}
