package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDeployUnitsUseFlagsTheCLIHas: every ExecStart line of the systemd
// units in examples/deploy/ runs a sessionbus command that exists, with flags that
// command has, and the roles up runs each have a unit.
func TestDeployUnitsUseFlagsTheCLIHas(t *testing.T) {
	flagsOf := map[string][]string{}
	for _, c := range shellCommands() {
		flagsOf[c.name] = flagWords(c)
	}
	units, err := filepath.Glob("../../examples/deploy/*.service")
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		execs := 0
		for line := range strings.SplitSeq(string(b), "\n") {
			cmdLine, ok := strings.CutPrefix(strings.TrimSpace(line), "ExecStart=")
			if !ok {
				continue
			}
			execs++
			fields := strings.Fields(cmdLine)
			if len(fields) < 2 || filepath.Base(fields[0]) != "sessionbus" {
				t.Errorf("%s: ExecStart %q does not run sessionbus COMMAND", u, cmdLine)
				continue
			}
			name := fields[1]
			flags, ok := flagsOf[name]
			if !ok {
				t.Errorf("%s: ExecStart runs sessionbus %s, which is no command", u, name)
				continue
			}
			ran[name] = true
			for _, w := range fields[2:] {
				w, _, _ = strings.Cut(w, "=")
				if strings.HasPrefix(w, "-") && !slices.Contains(flags, "--"+strings.TrimLeft(w, "-")) {
					t.Errorf("%s: ExecStart passes %s, which sessionbus %s does not have", u, w, name)
				}
			}
		}
		if execs != 1 {
			t.Errorf("%s has %d ExecStart lines, want 1", u, execs)
		}
	}
	for _, role := range []string{"serve", "worker", "gateway"} {
		if !ran[role] {
			t.Errorf("no unit in deploy/ runs sessionbus %s", role)
		}
	}
}

// TestDeployUnitsVerify runs systemd-analyze verify on examples/deploy/'s units,
// where it is installed: every line parses and names a known setting. The
// binary they run is this machine's true, since none is installed.
func TestDeployUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze here")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true binary to stand in for sessionbus")
	}
	units, err := filepath.Glob("../../examples/deploy/*")
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in examples/deploy/: %v", err)
	}
	dir := t.TempDir()
	var names []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(name, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/sessionbus", truePath)), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, append([]string{"verify", "--man=no"}, names...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
