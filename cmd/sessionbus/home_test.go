package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/ops/home"
)

// TestHomeGivesClientDefaults: --server and --creds default to what the
// home's client config names; SESSIONBUS_SERVER and SESSIONBUS_CREDS win
// over it; without a client config they are serve's defaults in the home.
func TestHomeGivesClientDefaults(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(home.Env, dir)
	t.Setenv("SESSIONBUS_SERVER", "")
	t.Setenv("SESSIONBUS_CREDS", "")
	if got := defaultServer(); got != fallbackServer {
		t.Errorf("no client config: server %s", got)
	}
	if got := defaultCreds(); got != filepath.Join(dir, "operator.creds") {
		t.Errorf("no client config: creds %s", got)
	}
	if err := writeClientConfig(dir, "nats://127.0.0.1:4999", "test", true); err != nil {
		t.Fatal(err)
	}
	if got := defaultCreds(); got != filepath.Join(dir, "operator.creds") {
		t.Errorf("serve's client config: creds %s", got)
	}
	// a client config naming files elsewhere is followed
	elsewhere := filepath.Join(t.TempDir(), "op.creds")
	if err := home.WriteClient(dir, home.Client{Server: "nats://127.0.0.1:4999", Creds: map[string]string{
		home.Operator: elsewhere, "ops": filepath.Join(dir, "creds", "ops.creds")}}); err != nil {
		t.Fatal(err)
	}
	if got := defaultCreds(); got != elsewhere {
		t.Errorf("client config naming %s: creds %s", elsewhere, got)
	}
	out := func(args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		if code := run(args, strings.NewReader(""), &o, &e); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, e.String())
		}
		return strings.TrimSpace(o.String())
	}
	if got := out("home", "--url"); got != "nats://127.0.0.1:4999" {
		t.Errorf("home --url = %s, want the client config's", got)
	}
	if got := out("home", "--role", "ops"); got != filepath.Join(dir, "creds", "ops.creds") {
		t.Errorf("home --role ops = %s", got)
	}
	if got := out("home"); got != dir {
		t.Errorf("home = %s", got)
	}
	t.Setenv("SESSIONBUS_SERVER", "nats://127.0.0.1:5000")
	t.Setenv("SESSIONBUS_CREDS", "/elsewhere.creds")
	if defaultServer() != "nats://127.0.0.1:5000" || defaultCreds() != "/elsewhere.creds" {
		t.Errorf("the environment does not win: %s %s", defaultServer(), defaultCreds())
	}
	var o, e bytes.Buffer
	if code := run([]string{"home", "--role", "boss"}, strings.NewReader(""), &o, &e); code != 2 || !strings.Contains(e.String(), "boss") {
		t.Errorf("home --role boss: exit %d %s", code, e.String())
	}
}

// TestHomeNoteForLegacyDir: a ./sessionbus-data here is used, and each
// command that reads the home says so on stderr, unless given --data.
func TestHomeNoteForLegacyDir(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	t.Setenv(home.Env, "")
	if err := os.Mkdir(home.Legacy, 0o700); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	if code := run([]string{"home"}, strings.NewReader(""), &o, &e); code != 0 || strings.TrimSpace(o.String()) != "./sessionbus-data" || !strings.Contains(e.String(), "found in this folder") {
		t.Errorf("home: exit %d %q %q", code, o.String(), e.String())
	}
	e.Reset()
	run([]string{"creds", "--data", t.TempDir(), "--inbox-of", "none"}, strings.NewReader(""), &o, &e)
	if strings.Contains(e.String(), "found in this folder") {
		t.Errorf("a note with --data given: %s", e.String())
	}
	e.Reset()
	run([]string{"version"}, strings.NewReader(""), &o, &e)
	if e.Len() != 0 {
		t.Errorf("version printed %q on stderr", e.String())
	}
}
