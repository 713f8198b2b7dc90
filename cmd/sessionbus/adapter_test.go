package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdapterWebhookUsage: the webhook adapter's mistakes a user can make
// are usage errors (exit 2) that say what to change, found before it
// connects to anything.
func TestAdapterWebhookUsage(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.secret")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noKey := filepath.Join(dir, "no-key.creds")
	if err := os.WriteFile(noKey, []byte("not a creds file"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"adapter", "webhook", "--server", "nats://127.0.0.1:1", "--creds", noKey}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--deliver-url", "http://127.0.0.1:9000"}, "--channel and --deliver-url are required"},
		{[]string{"--channel", "web"}, "--channel and --deliver-url are required"},
		{[]string{"--channel", "we.b", "--deliver-url", "http://127.0.0.1:9000"}, `--channel: channel "we.b" is not a channel id`},
		{[]string{"--channel", "web", "--deliver-url", "http://127.0.0.1:9000", "--listen", "0.0.0.0:8788"}, "not a loopback address"},
		{[]string{"--channel", "web", "--deliver-url", "http://127.0.0.1:9000", "--secret-file", empty}, "is empty: write a long random secret"},
		{[]string{"--channel", "web", "--deliver-url", "http://127.0.0.1:9000", "--legacy-signatures"}, "--legacy-signatures needs --secret-file"},
		{[]string{"--channel", "web", "--deliver-url", "http://127.0.0.1:9000", "--attempts", "0"}, "--attempts must be 1 or more"},
		{[]string{"--channel", "web", "--deliver-url", "http://127.0.0.1:9000"}, "has no token key to mint the ingress token"},
		{[]string{"--channel", "web", "--deliver-url", "http://127.0.0.1:9000", "--token-file", filepath.Join(dir, "missing")}, "--token-file:"},
		{[]string{"--channel", "web", "--deliver-url", "http://127.0.0.1:9000", "--ack-wait", "5s", "--timeout", "5s"}, "--ack-wait 5s must be longer than --timeout 5s"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		code := run(append(append([]string{}, base...), tc.args...), strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"adapter", "slack"}, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), "adapter webhook") {
		t.Errorf("unknown adapter: exit %d, %q", code, errb.String())
	}
}
