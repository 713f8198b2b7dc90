package config

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c := Default()
	if c.Tools.Sessions.Visibility != "tree" || c.Session.AgentToAgent.MaxPingPongTurns != 5 ||
		c.Agents.Defaults.Subagents.MaxSpawnDepth != 1 || c.Agents.Defaults.Subagents.MaxChildrenPerAgent != 5 ||
		c.Agents.Defaults.Subagents.ArchiveAfterMinutes != 60 || c.Bus.Prefix != "sb" || c.Tools.AgentToAgent.Enabled {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestOpenClawKeys(t *testing.T) {
	p := write(t, "sessionbus.yaml", `
tools:
  sessions: {visibility: ALL}
  agentToAgent: {enabled: true, allow: ["main", "ops*"]}
session:
  sendPolicy:
    default: allow
    rules: [{action: deny, match: {channel: discord, chatType: group}}]
  agentToAgent: {maxPingPongTurns: 30}
agents:
  defaults:
    subagents: {maxSpawnDepth: 2}
  list:
    - {id: Main, runtime: script}
logging: {redactSensitive: "off", redactPatterns: ["foo\\d+"]}
`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tools.Sessions.Visibility != "all" || !c.Tools.AgentToAgent.Enabled || len(c.Tools.AgentToAgent.Allow) != 2 {
		t.Fatalf("tools: %+v", c.Tools)
	}
	if c.Session.AgentToAgent.MaxPingPongTurns != 20 {
		t.Fatalf("maxPingPongTurns not clamped to 20: %d", c.Session.AgentToAgent.MaxPingPongTurns)
	}
	if c.Session.SendPolicy == nil || c.Session.SendPolicy.Rules[0].Match.ChatType != "group" {
		t.Fatalf("sendPolicy: %+v", c.Session.SendPolicy)
	}
	if c.Agents.List[0].ID != "main" || c.Agents.Defaults.Subagents.MaxSpawnDepth != 2 {
		t.Fatalf("agents: %+v", c.Agents)
	}
	if c.Logging.RedactSensitive != "off" || c.Logging.RedactPatterns[0] != `foo\d+` {
		t.Fatalf("logging: %+v", c.Logging)
	}
}

func TestInvalidVisibilityFallsBack(t *testing.T) {
	c, err := Load(write(t, "c.yaml", "tools: {sessions: {visibility: everyone}}\n"), nil)
	if err != nil || c.Tools.Sessions.Visibility != "tree" {
		t.Fatalf("got %v %v", c, err)
	}
}

func TestMalformedValuesRefuse(t *testing.T) {
	for body, want := range map[string]string{
		"session: {agentToAgent: {maxPingPongTurns: lots}}\n": "maxpingpongturns",
		"agents: {list: [{id: 'bad id'}]}\n":                  "agents.list[0].id",
		"session: {sendPolicy: {default: maybe}}\n":           "session.sendPolicy.default",
		"logging: {redactSensitive: sometimes}\n":             "logging.redactSensitive",
		"bus: {prefix: 'a.b'}\n":                              "bus.prefix",
		"bus: {runRecordMaxAge: soon}\n":                      "runrecordmaxage",
		"bus: {deliverMaxAge: 10s}\n":                         "bus.deliverMaxAge",
		"bus: {contextCacheBytes: plenty}\n":                  "bus.contextCacheBytes",
	} {
		_, err := Load(write(t, "c.yaml", body), nil)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
			t.Errorf("%q: err = %v, want mention of %s", body, err, want)
		}
	}
}

// TestMalformedDiskBudgetDisables: a malformed maxDiskBytes starts with a
// warning and no budget, never the 2gb default (seed 000).
func TestMalformedDiskBudgetDisables(t *testing.T) {
	var logs bytes.Buffer
	c, err := Load(write(t, "c.yaml", "session: {maintenance: {maxDiskBytes: huge}}\n"), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := c.DiskBudget(); ok || n != 0 {
		t.Fatalf("budget %d %v, want disabled", n, ok)
	}
	if !strings.Contains(logs.String(), "session.maintenance.maxDiskBytes") || !strings.Contains(logs.String(), "DISABLED") {
		t.Fatalf("no start-up warning: %s", logs.String())
	}
	for in, want := range map[string]int64{"": 10 << 30, "500mb": 500 << 20, "2gb": 2 << 30, "1024": 1024} {
		body := "{}\n"
		if in != "" {
			body = "session: {maintenance: {maxDiskBytes: " + in + "}}\n"
		}
		c, err := Load(write(t, "c.yaml", body), nil)
		if n, ok := c.DiskBudget(); err != nil || !ok || n != want {
			t.Fatalf("%q: budget %d %v %v, want %d", in, n, ok, err, want)
		}
	}
}

// The context cache's bound: a size, 0 for none, 64mb when unset.
func TestContextCacheBytes(t *testing.T) {
	for in, want := range map[string]int64{"": 64 << 20, "0": 0, "16mb": 16 << 20, "1048576": 1 << 20} {
		body := "{}\n"
		if in != "" {
			body = "bus: {contextCacheBytes: " + in + "}\n"
		}
		c, err := Load(write(t, "c.yaml", body), nil)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if n, err := c.ContextCache(); err != nil || n != want {
			t.Fatalf("%q: %d %v, want %d", in, n, err, want)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Setenv("SESSIONBUS_TOOLS_SESSIONS_VISIBILITY", "agent")
	c, err := Load(write(t, "c.yaml", "{}\n"), nil)
	if err != nil || c.Tools.Sessions.Visibility != "agent" {
		t.Fatalf("got %v %v", c.Tools.Sessions, err)
	}
}
