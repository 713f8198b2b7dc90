package home

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestResolveOrder: $SESSIONBUS_HOME wins; else ./sessionbus-data when it
// exists here (with a note saying so); else the state dir, under
// $XDG_STATE_HOME or ~/.local/state on Linux, never the working directory.
func TestResolveOrder(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the XDG state dir is Linux's")
	}
	work, user := t.TempDir(), t.TempDir()
	t.Chdir(work)
	t.Setenv("HOME", user)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv(Env, "")

	h := Resolve()
	if want := filepath.Join(user, ".local", "state", "sessionbus"); h.Dir != want || h.From != FromState || h.Note() != "" {
		t.Errorf("no env, no legacy dir: %+v (note %q), want %s from the state dir, no note", h, h.Note(), want)
	}
	t.Setenv("XDG_STATE_HOME", filepath.Join(user, "xdg"))
	if h := Resolve(); h.Dir != filepath.Join(user, "xdg", "sessionbus") {
		t.Errorf("XDG_STATE_HOME set: %+v", h)
	}
	t.Setenv("XDG_STATE_HOME", "relative/dir") // the XDG rule: ignore a relative path
	if h := Resolve(); h.Dir != filepath.Join(user, ".local", "state", "sessionbus") {
		t.Errorf("relative XDG_STATE_HOME: %+v", h)
	}

	if err := os.Mkdir(filepath.Join(work, Legacy), 0o700); err != nil {
		t.Fatal(err)
	}
	h = Resolve()
	if h.Dir != "./"+Legacy || h.From != FromLegacy {
		t.Errorf("with ./sessionbus-data here: %+v", h)
	}
	if n := h.Note(); !strings.Contains(n, "./sessionbus-data") || !strings.Contains(n, h.State) || !strings.Contains(n, Env+"="+filepath.Join(work, Legacy)) {
		t.Errorf("legacy note %q does not say which dir, where others look, and how to keep using it", n)
	}

	t.Setenv(Env, filepath.Join(user, "explicit"))
	if h := Resolve(); h.Dir != filepath.Join(user, "explicit") || h.From != FromEnv || h.Note() != "" {
		t.Errorf("SESSIONBUS_HOME set: %+v", h)
	}
}

// TestClientConfigRoundTrip: the written file holds absolute paths (so it
// holds from any folder), is the owner's only, and reads back; a missing
// file is not an error, a broken one names itself.
func TestClientConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := ReadClient(dir); ok || err != nil {
		t.Fatalf("no file: ok %v err %v", ok, err)
	}
	work := t.TempDir() // a relative path is the writer's, not the data dir's
	t.Chdir(work)
	in := Client{Server: "nats://127.0.0.1:4300,nats://127.0.0.1:4301", WrittenBy: "test",
		Creds: map[string]string{Operator: "operator.creds", "ops": filepath.Join(dir, "creds", "ops.creds")}}
	if err := WriteClient(dir, in); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, ClientFile))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	got, ok, err := ReadClient(dir)
	if !ok || err != nil {
		t.Fatalf("read: ok %v err %v", ok, err)
	}
	if got.Server != in.Server || got.Creds[Operator] != filepath.Join(work, "operator.creds") || got.Creds["ops"] != in.Creds["ops"] {
		t.Errorf("read back %+v", got)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(leftovers) != 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
	if err := os.WriteFile(filepath.Join(dir, ClientFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadClient(dir); err == nil || !strings.Contains(err.Error(), ClientFile) {
		t.Errorf("broken file: %v", err)
	}
}
