package main

import (
	"bytes"
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
