package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionbus/sessionbus/bus/bustest"
	"github.com/sessionbus/sessionbus/gateway"
)

// TestMaintenanceCapArchivesRestorably runs session.maintenance with a low
// maxEntries against `sessionbus serve` in each mode. enforce: the sessions
// over the cap are archived before they are removed, each archive holds
// every entry of its transcript (archive get, byte for byte), restore
// brings every entry back, and until then sessions_history of a capped
// session answers with an error naming its archive, not an empty page.
// warn: nothing is archived or removed, and each session it would cap is
// logged.
func TestMaintenanceCapArchivesRestorably(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve twice per maintenance mode")
	}
	for _, mode := range []string{"enforce", "warn"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel() // each waits most of a minute for its sweep
			testMaintenanceCap(t, mode)
		})
	}
}

func testMaintenanceCap(t *testing.T, mode string) {
	sb := binary(t, "sessionbus")
	data := t.TempDir()
	creds := filepath.Join(data, "operator.creds")
	const total, keep = 5, 2
	keys := make([]string, total)
	transcripts := make([]string, total)

	// serve runs with the low cap from the start: its gateway's first
	// sweep (at start, on no sessions) takes the minute's maintenance
	// lease, and a later one (one or two minutes on, as the lease's
	// expiry and the sweep's tick fall) finds the sessions written
	cfg := filepath.Join(t.TempDir(), "sessionbus.yaml")
	yaml := fmt.Sprintf("tools:\n  sessions:\n    visibility: all\nsession:\n  maintenance:\n    mode: %s\n    maxEntries: %d\n", mode, keep)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, "serve", "--data", data, "--listen", anyPort, "--config", cfg)
	url, _ := srv.ready(t)
	common := []string{"--server", url, "--creds", creds}
	for i := range total {
		keys[i] = fmt.Sprintf("agent:main:kept%d", i)
		var b strings.Builder
		for j := range 3 + i {
			role := "user"
			if j%2 == 1 {
				role = "assistant"
			}
			fmt.Fprintf(&b, `{"role":%q,"content":"session %d line %d"}`+"\n", role, i, j)
		}
		transcripts[i] = b.String()
		if _, errOut, code := run(t, transcripts[i], sb, append([]string{"import"}, append(common, keys[i])...)...); code != 0 {
			t.Fatalf("import %s: %s", keys[i], errOut)
		}
	}
	call := func(tool, params string) map[string]any {
		t.Helper()
		out, errOut, code := run(t, "", sb, append([]string{"call"}, append(common, tool, params)...)...)
		var m map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &m) != nil {
			t.Fatalf("call %s %s: %d %s %s", tool, params, code, out, errOut)
		}
		return m
	}
	listArchives := func() []struct{ ID, Key, Reason, State string } {
		t.Helper()
		out, errOut, code := run(t, "", sb, append([]string{"archive", "ls"}, append(common, "--json")...)...)
		var metas []struct{ ID, Key, Reason, State string }
		if code != 0 || json.Unmarshal([]byte(out), &metas) != nil {
			t.Fatalf("archive ls: %d %s %s", code, out, errOut)
		}
		return metas
	}
	// history checks that key's sessions_history holds transcript i's
	// messages, every one, in order
	history := func(i int) {
		t.Helper()
		h := call("sessions_history", fmt.Sprintf(`{"sessionKey":%q,"limit":100}`, keys[i]))
		msgs, _ := h["messages"].([]any)
		want := 3 + i
		if h["status"] != nil || len(msgs) != want {
			t.Fatalf("history of %s: %d messages, want %d: %v", keys[i], len(msgs), want, h)
		}
		for j, m := range msgs {
			if b, _ := json.Marshal(m); !strings.Contains(string(b), fmt.Sprintf("session %d line %d", i, j)) {
				t.Fatalf("history of %s, message %d: %s", keys[i], j, b)
			}
		}
	}

	if mode == "warn" {
		// one summary line a pass (the gateway's attributes come between
		// its message and its counts)
		count := fmt.Sprintf(" cap=%d ", total-keep)
		bustest.WaitFor(t, 4*gateway.LifecycleSweepInterval, "the warn-mode sweep to log the sessions it would cap", func() bool {
			for _, l := range strings.Split(srv.errText(), "\n") {
				if strings.Contains(l, "session maintenance (warn mode): nothing changed") && strings.Contains(l, count) {
					return true
				}
			}
			return false
		})
		for i := range total - keep {
			if !strings.Contains(srv.errText(), keys[i]+" at ") {
				t.Fatalf("warn mode did not name %s:\n%s", keys[i], srv.errText())
			}
		}
		if a := listArchives(); len(a) != 0 {
			t.Fatalf("warn mode archived: %v", a)
		}
		for i := range total {
			history(i)
		}
		return
	}

	var archived []struct{ ID, Key, Reason, State string }
	bustest.WaitFor(t, 4*gateway.LifecycleSweepInterval, "the sweep to cap the least recently updated sessions", func() bool {
		archived = listArchives()
		done := 0
		for _, a := range archived {
			if a.State == "done" {
				done++
			}
		}
		return done == total-keep // each is done once its session is removed
	})
	if l := call("sessions_list", `{}`); l["count"] != float64(keep) {
		t.Fatalf("after the cap: %v", l)
	}
	for i := total - keep; i < total; i++ {
		history(i)
	}
	for i := range total - keep {
		var m *struct{ ID, Key, Reason, State string }
		for j := range archived {
			if archived[j].Key == keys[i] {
				m = &archived[j]
			}
		}
		if m == nil || m.Reason != "deleted" || m.State != "done" {
			t.Fatalf("no done archive of capped %s: %v", keys[i], archived)
		}
		// until it is restored, its history says where it went
		h := call("sessions_history", fmt.Sprintf(`{"sessionKey":%q}`, keys[i]))
		msg, _ := h["error"].(string)
		if h["status"] != "error" || !strings.Contains(msg, m.ID) || !strings.Contains(msg, "archive restore") || !strings.Contains(msg, fmt.Sprintf("%d entries", 3+i)) {
			t.Fatalf("history of capped %s: %v", keys[i], h)
		}
		if out, errOut, code := run(t, "", sb, append([]string{"archive", "get"}, append(common, m.ID)...)...); code != 0 || out != transcripts[i] {
			t.Fatalf("archive get %s: %d %q, want %q (%s)", m.ID, code, out, transcripts[i], errOut)
		}
		out, errOut, code := run(t, "", sb, append([]string{"archive", "restore"}, append(common, m.ID)...)...)
		if code != 0 || !strings.Contains(out, fmt.Sprintf(`"entries": %d`, 3+i)) {
			t.Fatalf("archive restore %s: %d %s %s", m.ID, code, out, errOut)
		}
		bustest.WaitFor(t, 20*time.Second, "the restored session indexed", func() bool {
			h := call("sessions_history", fmt.Sprintf(`{"sessionKey":%q,"limit":100}`, keys[i]))
			return h["status"] == nil
		})
		history(i)
	}
}
