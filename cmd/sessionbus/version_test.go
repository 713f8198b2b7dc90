package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/sessionbus/sessionbus/bus"
)

func TestVersionPrintsReleaseCommitAndServer(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, nil, &out, &errb); code != 0 {
		t.Fatalf("version exit %d, stderr %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("version printed %q, want version, commit and nats-server lines", out.String())
	}
	if !strings.HasPrefix(lines[0], "sessionbus "+bus.Version) {
		t.Errorf("line 1 = %q, want sessionbus %s", lines[0], bus.Version)
	}
	if !strings.HasPrefix(lines[1], "commit ") || len(lines[1]) <= len("commit ") {
		t.Errorf("line 2 = %q, want commit <sha|unknown>", lines[1])
	}
	if lines[2] != "nats-server "+server.VERSION {
		t.Errorf("line 3 = %q, want nats-server %s", lines[2], server.VERSION)
	}
	if code := run([]string{"version", "extra"}, nil, &out, &errb); code != 2 {
		t.Errorf("version with an argument exit %d, want 2", code)
	}
}

// TestVersionCommitLine: the commit line says where the commit came from,
// and says plainly how to get one when the build recorded none.
func TestVersionCommitLine(t *testing.T) {
	vcs := func(mainVersion string, kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/sessionbus/sessionbus", Version: mainVersion}}
		for i := 0; i+1 < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	const rev = "9fd863e7f4bf91ffba9cbd503ead06313d1627ad"
	for _, c := range []struct {
		name, stamped string
		info          *debug.BuildInfo
		want          string
	}{
		{"release stamp", "abc1234", vcs("(devel)"), "abc1234"},
		{"go build in a clone", "", vcs("v0.0.0-20261204102244-9fd863e7f4bf", "vcs", "git", "vcs.revision", rev, "vcs.time", "2026-12-04T10:22:44Z", "vcs.modified", "false"),
			"9fd863e (2026-12-04T10:22:44Z)"},
		{"uncommitted changes", "", vcs("(devel)", "vcs.revision", rev, "vcs.time", "2026-12-04T10:22:44Z", "vcs.modified", "true"),
			"9fd863e (2026-12-04T10:22:44Z) with uncommitted changes"},
		{"go install @pseudo-version", "", vcs("v0.0.0-20261204102244-9fd863e7f4bf"), "9fd863e (from the module version v0.0.0-20261204102244-9fd863e7f4bf)"},
		{"go install @tag", "", vcs("v0.1.0"), noVCS},
		{"-buildvcs=false", "", vcs("(devel)", "-buildvcs", "false"), noVCS},
		{"no build info", "", nil, noVCS},
	} {
		if got := commitLine(c.stamped, c.info); got != c.want {
			t.Errorf("%s: commit %q, want %q", c.name, got, c.want)
		}
	}
	if !strings.Contains(noVCS, "-buildvcs=true") {
		t.Errorf("the no-commit line does not say how to get one: %q", noVCS)
	}
}
