package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/config/configtest"
)

// TestQueueFor: a session's queue is its /queue override, then the
// channel's mode and debounce, then messages.queue, then OpenClaw's
// defaults (steer, 500 ms, 20, summarize).
func TestQueueFor(t *testing.T) {
	def := config.Default()
	if got := def.QueueFor("telegram", config.QueueOverride{}); got != (config.QueueSettings{Mode: "steer", DebounceMs: 500, Cap: 20, Drop: "summarize"}) {
		t.Fatalf("defaults: %+v", got)
	}
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", `
messages:
  queue:
    mode: followup
    byChannel: {discord: coalesce}
    debounceMsByChannel: {discord: 1500}
    cap: 5
    drop: oldest
`)
	if got := cfg.QueueFor("telegram", config.QueueOverride{}); got != (config.QueueSettings{Mode: "followup", DebounceMs: 500, Cap: 5, Drop: "old"}) {
		t.Fatalf("global: %+v", got)
	}
	if got := cfg.QueueFor("discord", config.QueueOverride{}); got.Mode != "collect" || got.DebounceMs != 1500 {
		t.Fatalf("discord: %+v", got)
	}
	ms := int64(0)
	if got := cfg.QueueFor("discord", config.QueueOverride{Mode: "interrupt", DebounceMs: &ms, Cap: 9, Drop: "new"}); got != (config.QueueSettings{Mode: "interrupt", DebounceMs: 0, Cap: 9, Drop: "new"}) {
		t.Fatalf("session override: %+v", got)
	}
}

// TestQueueBadValues: a mode or drop that is none, a negative debounce
// or a cap below 1 refuse to start, naming the key.
func TestQueueBadValues(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"mode: sideways", `messages.queue.mode "sideways" is not a queue mode`},
		{"byChannel: {slack: nope}", `messages.queue.byChannel.slack "nope" is not a queue mode`},
		{"drop: maybe", `messages.queue.drop "maybe" must be old, new or summarize`},
		{"debounceMs: -1", "messages.queue.debounceMs must be 0 or more"},
		{"cap: 0", "messages.queue.cap must be 1 or more"},
	} {
		path := filepath.Join(t.TempDir(), "sessionbus.yaml")
		if err := os.WriteFile(path, []byte("messages:\n  queue:\n    "+tc.yaml+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(path, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestParseQueueDebounce reads /queue's debounce words.
func TestParseQueueDebounce(t *testing.T) {
	for in, want := range map[string]int64{"1500": 1500, "250ms": 250, "2s": 2000, "0.5s": 500, "1m": 60000} {
		if got, ok := config.ParseQueueDebounce(in); !ok || got != want {
			t.Fatalf("%s: %d %v, want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "soon", "-1s", "2x"} {
		if _, ok := config.ParseQueueDebounce(in); ok {
			t.Fatalf("%q parsed", in)
		}
	}
}
