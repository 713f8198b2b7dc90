package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatStreamCLI: `chat --stream` prints the turn's text from its live
// output (sb.live.<key>), not from the ingress's answer: a reply the live
// output did not carry whole would be announced on stderr. A tool-using
// turn streams the same way, and a failed turn exits 1 with its error.
func TestChatStreamCLI(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "sessionbus.yaml")
	cfg := `
agents:
  list:
    - id: main
      runtime: script
      script:
        rules:
          - match: "^fail"
            error: "scripted failure"
          - match: "^count"
            tool: {name: sessions_list, params: {limit: 5}}
            reply: "there are {{result.count}} sessions here"
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, "serve", "--data", data, "--listen", anyPort, "--config", cfgPath)
	url, _ := srv.ready(t)
	creds := filepath.Join(data, "operator.creds")
	if _, errOut, code := run(t, `{"role":"user","content":"hi"}`, sb, "import", "--server", url, "--creds", creds, "agent:main:main"); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	chat := func(text string) (string, string, int) {
		return run(t, "", sb, "chat", "--server", url, "--creds", creds, "--stream", "agent:main:main", text)
	}

	for _, tc := range []struct{ text, want string }{
		{"several words in a row", "several words in a row\n"},
		{"count them", "there are 1 sessions here\n"},
	} {
		out, errOut, code := chat(tc.text)
		if code != 0 || out != tc.want || errOut != "" {
			t.Fatalf("chat --stream %q: code %d stdout %q stderr %q", tc.text, code, out, errOut)
		}
	}
	out, errOut, code := chat("fail please")
	if code != 1 || out != "" || !strings.Contains(errOut, "scripted failure") {
		t.Fatalf("failing turn: code %d stdout %q stderr %q", code, out, errOut)
	}
	if _, errOut, code = run(t, "", sb, "chat", "--server", url, "--creds", creds, "--stream", "--timeout", "0", "agent:main:main", "x"); code != 2 || !strings.Contains(errOut, "--stream") {
		t.Fatalf("--stream --timeout 0: code %d stderr %q", code, errOut)
	}
}
