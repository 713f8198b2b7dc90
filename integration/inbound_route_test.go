package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatRouteCLI routes human messages against a real serve: `chat
// --route` and a `nats req` that names no session reach the sessions
// OpenClaw's per-channel-peer rule gives, create them once, and a Google
// Chat space's key (with "/") is readable with the stock nats CLI through
// its encoded name.
func TestChatRouteCLI(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "sessionbus.yaml")
	if err := os.WriteFile(cfgPath, []byte("session:\n  dmScope: per-channel-peer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, "serve", "--data", data, "--listen", anyPort, "--config", cfgPath)
	url, _ := srv.ready(t)
	creds := filepath.Join(data, "operator.creds")

	out, errOut, code := run(t, "", sb, "chat", "--server", url, "--creds", creds, "--route", "--channel", "telegram", "--from", "4242", "hello from a new peer")
	if code != 0 || out != "hello from a new peer\n" || errOut != "routed to agent:main:telegram:direct:4242 (new session)\n" {
		t.Fatalf("chat --route: code %d stdout %q stderr %q", code, out, errOut)
	}
	out, errOut, code = run(t, "", sb, "chat", "--server", url, "--creds", creds, "--route", "--channel", "telegram", "--from", "4242", "again")
	if code != 0 || out != "again\n" || errOut != "routed to agent:main:telegram:direct:4242\n" {
		t.Fatalf("chat --route again: code %d stdout %q stderr %q", code, out, errOut)
	}

	tok, _, code := run(t, "", sb, "token", "--creds", creds, "--adapter", "*")
	if code != 0 {
		t.Fatal("token --adapter")
	}
	nats := binary(t, "nats")
	admin := filepath.Join(data, "creds", "admin.creds")
	body := `{"channel":"googlechat","from":"users/7","groupId":"spaces/AAAA","text":"hi space","wait":true}`
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", admin, "req", "sb.inbound", body, "-H", "Sessionbus-Token:"+strings.TrimSpace(tok), "--raw")
	if code != 0 || !strings.Contains(out, `"sessionKey":"agent:main:googlechat:group:spaces/aaaa"`) || !strings.Contains(out, `"created":true`) || !strings.Contains(out, `"reply":"hi space"`) {
		t.Fatalf("routed nats req: %d %s %s", code, out, errOut)
	}
	ops := filepath.Join(data, "creds", "ops.creds")
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", ops, "--js-api-prefix", "sb.ops.js", "kv", "get", "sessions", "agent.main.googlechat.group.spaces/aaaa", "--raw")
	if code != 0 || !strings.Contains(out, `"origin":{"provider":"googlechat","chatType":"group","from":"users/7","to":"spaces/AAAA"}`) ||
		!strings.Contains(out, `"deliveryContext":{"channel":"googlechat","to":"spaces/AAAA"}`) {
		t.Fatalf("routed session entry: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", ops, "--js-api-prefix", "sb.ops.js", "stream", "get", "SB_TRANSCRIPTS", "--last-for", "sb.tr.agent.main.googlechat.group.spaces/aaaa")
	if code != 0 || !strings.Contains(out, "hi space") {
		t.Fatalf("transcript by the encoded key: %d %s %s", code, out, errOut)
	}
}
