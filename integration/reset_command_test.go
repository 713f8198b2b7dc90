package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestResetCommandCLI runs docs/inbound.md's /new examples against a real
// serve: `/new` alone answers and starts a new sessionId, the old
// transcript is what `archive get` prints, and `/new <model> text` sets
// the model and runs the text in the new session.
func TestResetCommandCLI(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	srv := start(t, "serve", "--data", data, "--listen", anyPort)
	url, _ := srv.ready(t)
	creds := filepath.Join(data, "operator.creds")
	key := "agent:main:main"
	old := "{\"role\":\"user\",\"content\":\"before the reset\"}\n{\"role\":\"assistant\",\"content\":\"noted\"}\n"
	if _, errOut, code := run(t, old, sb, "import", "--server", url, "--creds", creds, key); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	chat := func(text string) string {
		t.Helper()
		out, errOut, code := run(t, "", sb, "chat", "--server", url, "--creds", creds, "--channel", "telegram", "--from", "4242", key, text)
		if code != 0 {
			t.Fatalf("chat %q: %d %s %s", text, code, out, errOut)
		}
		return out
	}
	if out := chat("/new"); !strings.HasPrefix(out, "✅ New session started · sessionId ") {
		t.Fatalf("/new: %q", out)
	}
	out, errOut, code := run(t, "", sb, "archive", "ls", "--server", url, "--creds", creds, "--json")
	var metas []struct{ ID, Key, Reason, State string }
	if code != 0 || json.Unmarshal([]byte(out), &metas) != nil || len(metas) != 1 || metas[0].Reason != "reset" || metas[0].Key != key {
		t.Fatalf("archive ls: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := run(t, "", sb, "archive", "get", "--server", url, "--creds", creds, metas[0].ID); code != 0 || out != old {
		t.Fatalf("archive get: %d %q %s", code, out, errOut)
	}
	// the echo runtime answers with the message: the text after the model
	if out := chat("/new openai/gpt-4.1 hello there"); out != "hello there\n" {
		t.Fatalf("/new <model> text: %q", out)
	}
	nats := binary(t, "nats")
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", filepath.Join(data, "creds", "ops.creds"), "--js-api-prefix", "sb.ops.js", "kv", "get", "sessions", "agent.main.main", "--raw")
	if code != 0 || !strings.Contains(out, `"modelOverride":"gpt-4.1"`) || !strings.Contains(out, `"providerOverride":"openai"`) {
		t.Fatalf("session entry: %d %s %s", code, out, errOut)
	}
}
