package main

import (
	"context"
	"strings"
	"testing"
)

// TestSessionQueueCommand: `sessionbus session queue KEY MODE` stores the
// session's queue override and prints the queue, exit 0; `default` clears
// it; a word that is no mode exits 1 with OpenClaw's answer and writes
// nothing; a missing mode is a usage error.
func TestSessionQueueCommand(t *testing.T) {
	const key = "agent:main:main"
	st := startSessionCmd(t, nil, key)
	q := func(args ...string) (int, string, string) { return st.session("queue", args...) }
	stored := func() string {
		e, _, err := st.Worker.Deps.Store.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return e.Rares().QueueMode
	}
	if code, out, errs := q(key, "collect"); code != 0 || !strings.Contains(out, `"mode": "collect"`) || !strings.Contains(errs, "Queue mode set to collect.") || stored() != "collect" {
		t.Fatalf("collect: exit %d %s %s", code, out, errs)
	}
	if code, _, errs := q(key, "sideways"); code != 1 || !strings.Contains(errs, `Unrecognized queue mode \"sideways\". Valid modes: steer, followup, collect, steer+backlog, interrupt.`) || stored() != "collect" {
		t.Fatalf("sideways: exit %d %s", code, errs)
	}
	if code, out, errs := q(key, "default"); code != 0 || !strings.Contains(out, `"mode": "steer"`) || stored() != "" {
		t.Fatalf("default: exit %d %s %s", code, out, errs)
	}
	if code, _, errs := q(key); code != 2 || !strings.Contains(errs, "usage: sessionbus session") {
		t.Fatalf("no mode: exit %d %s", code, errs)
	}
}
