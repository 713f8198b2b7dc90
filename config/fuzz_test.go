package config

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

// FuzzParse feeds the loader arbitrary YAML and JSON: it must return a
// config or an error, never panic, and a config it returns must validate
// again unchanged (Validate's fallbacks are idempotent).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "{}", "tools: {profile: messaging, alsoAllow: [sessions_spawn]}\n",
		"tools:\n  sessions: {visibility: ALL}\n  agentToAgent: {enabled: true, allow: [\"ops*\"]}\n",
		"agents:\n  defaults:\n    models: {\"openai/gpt-4.1\": {alias: g}}\n  list:\n    - {id: Main, runtime: script, tools: {deny: [\"group:sessions\"]}}\n",
		"session: {sendPolicy: {default: deny, rules: [{action: allow, match: {channel: x}}]}}\n",
		"bus: {replicas: 2}\n", "bus: {runRecordMaxAge: 1s}\n", "session: {maintenance: {maxDiskBytes: -1gb}}\n",
		"agents: {list: [{id: a}, {id: A}]}\n", "tools: [1, 2]\n", "agents: {list: {id: x}}\n", "&a [*a]\n",
		`{"tools":{"profile":"minimal","deny":["*"]},"agents":{"list":[{"id":"x","subagents":{"maxSpawnDepth":-1}}]}}`,
		`{"logging":{"redactSensitive":"tools","redactPatterns":["(a"]}}`, "\x00\xff", "a: b: c",
	} {
		f.Add([]byte(s), strings.HasPrefix(s, "{"))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		format := "yaml"
		if asJSON {
			format = "json"
		}
		c, err := Parse(data, format, quiet)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		before := *c
		if err := c.Validate(quiet); err != nil {
			t.Fatalf("a loaded config fails validation again: %v", err)
		}
		if c.Tools.Sessions.Visibility != before.Tools.Sessions.Visibility || c.Tools.Profile != before.Tools.Profile {
			t.Fatalf("validation is not idempotent: %+v vs %+v", before.Tools, c.Tools)
		}
	})
}
