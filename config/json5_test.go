package config

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An OpenClaw openclaw.json (JSON5, other sections, model objects, an
// OpenClaw runtime object, an unsafe redact pattern) loads as it is.
func TestLoadOpenClawJSON5Config(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	c, err := Load(filepath.Join("testdata", "openclaw.json"), log)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tools.Sessions.Visibility != "agent" || !c.Tools.AgentToAgent.Enabled || c.Tools.Profile != "messaging" ||
		len(c.Tools.AlsoAllow) != 3 || len(c.Tools.AgentToAgent.Allow) != 2 {
		t.Errorf("tools = %+v", c.Tools)
	}
	if c.Session.AgentToAgent.MaxPingPongTurns != 3 || c.Session.SendPolicy == nil || c.Session.SendPolicy.Rules[0].Action != "deny" ||
		c.Session.Maintenance.MaxDiskBytes != "1gb" {
		t.Errorf("session = %+v", c.Session)
	}
	d := c.Agents.Defaults
	if d.Model != "openai/gpt-4.1" || d.Sandbox.Mode != "non-main" || d.Subagents.MaxSpawnDepth != 2 ||
		d.Subagents.MaxChildrenPerAgent != 4 || d.Subagents.ArchiveAfterMinutes != 30 {
		t.Errorf("agents.defaults = %+v", d)
	}
	if _, ok := d.Models["openai/gpt-4.1"]; !ok || d.Models["openai/gpt-4.1"].Alias != "gpt" {
		t.Errorf("agents.defaults.models = %+v", d.Models)
	}
	if len(c.Agents.List) != 2 || c.Agents.List[1].ID != "ops" || c.Agents.List[1].Model != "anthropic/claude-sonnet-4-5" ||
		c.Agents.List[1].Runtime != "" || c.Agents.List[1].Subagents == nil || c.Agents.List[1].Subagents.AllowAgents[0] != "*" {
		t.Errorf("agents.list = %+v", c.Agents.List)
	}
	if !strings.Contains(logs.String(), "agents.list[1].runtime") {
		t.Errorf("no warning about the OpenClaw runtime object; logs:\n%s", logs.String())
	}
	// The unsafe pattern is dropped with a warning naming it; the others
	// apply, in order.
	if got := strings.Join(c.Logging.RedactPatterns, " "); got != "acme_[a-z0-9]{8,} /corp-[0-9]{4}/g" {
		t.Errorf("redactPatterns = %q, want the two safe ones", c.Logging.RedactPatterns)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "pattern=(a+)+$ reason=") {
		t.Errorf("no warning naming the unsafe pattern; logs:\n%s", logs.String())
	}
}

func TestLoadJSON5Errors(t *testing.T) {
	p := write(t, "openclaw.json", "{ tools: { sessions: { visibility: 'all' } ")
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), "JSON5") || !strings.Contains(err.Error(), p) {
		t.Errorf("Load(truncated JSON5) = %v, want an error naming the file and JSON5", err)
	}
	p = write(t, "c.json5", "{ logging: { redactPatterns: ['(x+x+)+y'] }, }")
	c, err := Load(p, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Logging.RedactPatterns) != 0 {
		t.Errorf("redactPatterns = %q, want the unsafe one dropped", c.Logging.RedactPatterns)
	}
}

// With no --config, a sessionbus.json5 in the working directory is read.
func TestLoadFindsJSON5InWorkingDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sessionbus.json5"), []byte("{tools: {sessions: {visibility: 'self'}}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tools.Sessions.Visibility != "self" {
		t.Errorf("visibility = %q, want self from sessionbus.json5", c.Tools.Sessions.Visibility)
	}
}
