package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestChatCLI plays a human from the terminal against a real serve: the
// reply is printed, lands on sb.deliver.<channel>, and a refused message
// exits 1 with the reason; adapter tokens work with the stock nats CLI.
func TestChatCLI(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	srv := start(t, "serve", "--data", data, "--listen", anyPort)
	url, _ := srv.ready(t)
	creds := filepath.Join(data, "operator.creds")
	if _, errOut, code := run(t, `{"role":"user","content":"hi"}`, sb, "import", "--server", url, "--creds", creds, "agent:main:main"); code != 0 {
		t.Fatalf("import: %s", errOut)
	}

	// no agents configured: the echo runtime answers with the message
	out, errOut, code := run(t, "", sb, "chat", "--server", url, "--creds", creds, "--channel", "terminal", "--from", "ana", "agent:main:main", "hello from a human")
	if code != 0 || out != "hello from a human\n" {
		t.Fatalf("chat: code %d stdout %q stderr %q", code, out, errOut)
	}
	nats := binary(t, "nats")
	ops := filepath.Join(data, "creds", "ops.creds")
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", ops, "--js-api-prefix", "sb.ops.js", "stream", "get", "SB_DELIVER", "--last-for", "sb.deliver.terminal")
	if code != 0 || !strings.Contains(out, `"message":"hello from a human"`) || !strings.Contains(out, `"to":"ana"`) {
		t.Fatalf("delivery: %d %s %s", code, out, errOut)
	}
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", ops, "--js-api-prefix", "sb.ops.js", "kv", "get", "sessions", "agent.main.main", "--raw")
	if code != 0 || !strings.Contains(out, `"lastChannel":"terminal"`) || !strings.Contains(out, `"lastTo":"ana"`) ||
		!strings.Contains(out, `"deliveryContext":{"channel":"terminal","to":"ana"}`) {
		t.Fatalf("route: %d %s %s", code, out, errOut)
	}

	_, errOut, code = run(t, "", sb, "chat", "--server", url, "--creds", creds, "agent:main:nobody", "hello?")
	if code != 1 || !strings.Contains(errOut, `"code":404`) || !strings.Contains(errOut, "unknown session agent:main:nobody") {
		t.Fatalf("unknown session: code %d stderr %q", code, errOut)
	}
	if _, _, code = run(t, "", sb, "chat", "--server", url, "agent:main:main"); code != 2 {
		t.Fatalf("chat without text: code %d, want 2", code)
	}
	if _, _, code = run(t, "", sb, "token", "--creds", creds, "--as", "agent:main:main", "--adapter", "x"); code != 2 {
		t.Fatalf("token --as and --adapter: code %d, want 2", code)
	}

	// any NATS client is an adapter with an adapter token; an agent's is refused
	tok, _, code := run(t, "", sb, "token", "--creds", creds, "--adapter", "telegram")
	if code != 0 || !strings.HasPrefix(tok, "ey") {
		t.Fatalf("token --adapter: %q", tok)
	}
	body := `{"sessionKey":"agent:main:main","channel":"telegram","from":"42","text":"via nats","wait":true}`
	out, errOut, code = run(t, "", nats, "-s", url, "--creds", filepath.Join(data, "creds", "admin.creds"), "req", "sb.inbound", body, "-H", "Sessionbus-Token:"+strings.TrimSpace(tok), "--raw")
	if code != 0 || !strings.Contains(out, `"status":"ok"`) || !strings.Contains(out, `"reply":"via nats"`) {
		t.Fatalf("nats req sb.inbound: %d %s %s", code, out, errOut)
	}
	agentTok, _, _ := run(t, "", sb, "token", "--creds", creds, "--as", "agent:main:main")
	out, _, _ = run(t, "", nats, "-s", url, "--creds", filepath.Join(data, "creds", "admin.creds"), "req", "sb.inbound", body, "-H", "Sessionbus-Token:"+strings.TrimSpace(agentTok))
	if !strings.Contains(out, "403") || !strings.Contains(out, "an agent cannot speak as a human") {
		t.Fatalf("agent token on sb.inbound: %s", out)
	}
}
