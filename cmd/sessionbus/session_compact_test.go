package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway"
	"github.com/sessionbus/sessionbus/handlers"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// TestSessionCompactCommand: `sessionbus session compact KEY` has a
// gateway compact the session (exit 0, what it did on stderr); an agent
// that cannot summarize and an unknown key exit 1 with the reason, no key
// is a usage error.
func TestSessionCompactCommand(t *testing.T) {
	s := bustest.Server(t)
	nc, _ := bustest.Connect(t, s)
	op, err := bus.LoadOrCreateOperator(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := bustest.Context(t)
	cfg := config.Default()
	cfg.Agents.Defaults.Compaction.KeepRecentTokens = 20
	cfg.Agents.List = []config.Agent{
		{ID: "main", Runtime: "script", Script: map[string]any{"summary": "## Goal\nthe summary"}},
		{ID: "plain", Runtime: "script"},
	}
	w, err := handlers.StartWorker(ctx, nc, cfg, bus.NewVerifier(op.PublicKey()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	g, err := gateway.Start(ctx, nc, cfg, op, "gw-compact", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	now := time.Now().UnixMilli()
	for _, key := range []string{"agent:main:main", "agent:plain:main"} {
		agent := strings.Split(key, ":")[1]
		if _, err := w.Deps.Store.Create(ctx, &sessions.Entry{Key: key, AgentID: agent, SessionID: sessions.NewID(), CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := w.Deps.Transcripts.Append(ctx, bus.EncodeKey(key), fmt.Appendf(nil, `{"role":"user","content":"message %d with some words in it"}`, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	creds := bustest.AdminCreds(t, s.Deployment(), op)
	compact := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"session", "compact", "--server", s.URL(), "--creds", creds}, args...), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
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
