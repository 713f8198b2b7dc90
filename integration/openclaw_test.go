package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// An OpenClaw user's files as they are: serve starts with OpenClaw's
// openclaw.json (JSON5, an unsafe redact pattern that is ignored with a
// warning), and import --openclaw loads an OpenClaw state directory; running
// the import again appends nothing.
func TestOpenClawConfigAndStateDir(t *testing.T) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	cfg, err := filepath.Abs(filepath.Join("..", "config", "testdata", "openclaw.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, "serve", "--data", data, "--listen", anyPort, "--no-gateway", "--config", cfg)
	url, _ := srv.ready(t)
	// the warning is logged before "ready"; read stderr under its writer's lock
	waitStderr(t, srv.cmd, `pattern=(a+)+$`)
	state, err := filepath.Abs(filepath.Join("..", "flows", "importer", "openclawstore", "testdata", "state"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"imported 5 sessions (5 new) from 1 agents", "imported 5 sessions (0 new) from 1 agents"}
	for i, w := range want {
		out, errOut, code := run(t, "", sb, "import", "--server", url, "--creds", filepath.Join(data, "operator.creds"), "--openclaw", state)
		if code != 0 || !strings.Contains(errOut, w) {
			t.Fatalf("import --openclaw run %d: code %d stderr %s, want %q", i+1, code, errOut, w)
		}
		var sum struct {
			Imported int `json:"imported"`
			Present  int `json:"alreadyPresent"`
		}
		if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Imported+sum.Present != 8 || sum.Imported != 8*(1-i) {
			t.Fatalf("import --openclaw run %d stdout %s (%v): want 8 entries appended once", i+1, out, err)
		}
	}
	out, errOut, code := run(t, "", sb, "call", "--server", url, "--creds", filepath.Join(data, "operator.creds"),
		"--as", "agent:main:main", "sessions_list", "{}")
	if code != 0 || !strings.Contains(out, `"count": 4`) || !strings.Contains(out, `"key": "agent:main:matrix:channel:!ops:[2001:db8::1]"`) {
		t.Fatalf("sessions_list after the import: code %d %s %s", code, out, errOut)
	}
	_, errOut, code = run(t, "", sb, "import", "--server", url, "--creds", filepath.Join(data, "operator.creds"), "--openclaw", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "is not an OpenClaw state directory") || !strings.Contains(errOut, `"code":400`) {
		t.Fatalf("import --openclaw of an empty dir: code %d stderr %s", code, errOut)
	}
	_, errOut, code = run(t, "", sb, "import", "--server", url, "--creds", filepath.Join(data, "operator.creds"), "--openclaw", state, "agent:main:x")
	if code != 2 || !strings.Contains(errOut, "--openclaw takes no SESSIONKEY") {
		t.Fatalf("import --openclaw with a key: code %d stderr %s", code, errOut)
	}
}
