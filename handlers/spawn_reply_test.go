package handlers_test

import (
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/handlers"
)

// An accepted spawn's reply is encoded without the whole-result redaction
// pass when nothing in it may mask (the note's verdict is cached), and
// masked as before when something does: a configured pattern that matches
// the constant note, or the child's key.
func TestSpawnReplyRedaction(t *testing.T) {
	for _, c := range []struct {
		name, pattern string
		check         func(res map[string]any) bool
	}{
		{"nothing to mask", "", func(res map[string]any) bool {
			return res["note"] == handlers.SubagentSpawnAcceptedNote && strings.HasPrefix(res["childSessionKey"].(string), "agent:main:subagent:")
		}},
		{"the note masks", `polling tool`, func(res map[string]any) bool {
			note, _ := res["note"].(string)
			return note != handlers.SubagentSpawnAcceptedNote && !strings.Contains(note, "polling tool") && strings.Contains(note, "Auto-announce is push-based")
		}},
		{"the key masks", `subagent:[0-9a-f-]{36}`, func(res map[string]any) bool {
			key, _ := res["childSessionKey"].(string)
			return !strings.Contains(key, "subagent:") && res["note"] == handlers.SubagentSpawnAcceptedNote
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := spawnStack(t, func(cfg *config.Config) {
				if c.pattern != "" {
					cfg.Logging.RedactPatterns = []string{c.pattern}
				}
			})
			for range 2 { // the second reply uses the cached verdict on the note
				res := s.MustCall(mainKey, "sessions_spawn", `{"task":"x"}`)
				if res["status"] != "accepted" || !c.check(res) {
					t.Fatalf("reply %v", res)
				}
			}
		})
	}
}
