package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
)

// TestSessionCompactCommand: `sessionbus session compact KEY` has a
// gateway compact the session (exit 0, what it did on stderr); an agent
// that cannot summarize and an unknown key exit 1 with the reason, no key
// is a usage error.
func TestSessionCompactCommand(t *testing.T) {
	keys := []string{"agent:main:main", "agent:plain:main"}
	st := startSessionCmd(t, func(cfg *config.Config) {
		cfg.Agents.Defaults.Compaction.KeepRecentTokens = 20
		cfg.Agents.List = []config.Agent{
			{ID: "main", Runtime: "script", Script: map[string]any{"summary": "## Goal\nthe summary"}},
			{ID: "plain", Runtime: "script"},
		}
	}, keys...)
	ctx := bustest.Context(t)
	g, err := gateway.Start(ctx, st.Conn, st.Config, st.Operator, "gw-compact", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	for _, key := range keys {
		for i := range 10 {
			if _, err := st.Worker.Deps.Transcripts.Append(ctx, bus.EncodeKey(key), fmt.Appendf(nil, `{"role":"user","content":"message %d with some words in it"}`, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	compact := func(args ...string) (int, string, string) { return st.session("compact", args...) }
	code, out, errs := compact("agent:main:main")
	if code != 0 || !strings.Contains(out, `"status": "ok"`) || !strings.Contains(errs, "Compacted:") || !strings.Contains(out, `"compactionCount": 1`) {
		t.Fatalf("compact: exit %d %s %s", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"agent:plain:main"}, 1, "cannot compact"},
		{[]string{"agent:main:nobody"}, 1, `"code":404`},
		{nil, 2, "usage: sessionbus session"},
	} {
		code, _, errs := compact(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.msg) {
			t.Fatalf("%q: exit %d %.300s, want %d %q", tc.args, code, errs, tc.code, tc.msg)
		}
	}
}
