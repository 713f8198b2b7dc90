package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/config/configtest"
)

func TestQuotaDefaults(t *testing.T) {
	got := config.Default().Quotas
	if got != config.DefaultQuotas() {
		t.Fatalf("Default().Quotas = %+v, want %+v", got, config.DefaultQuotas())
	}
	for name, q := range map[string]config.Quota{
		"toolCallsPerSession": got.ToolCallsPerSession, "toolCallsPerAgent": got.ToolCallsPerAgent,
		"runsPerSession": got.RunsPerSession, "runsPerAgent": got.RunsPerAgent,
	} {
		if q.Unlimited() || q.Burst < 1 {
			t.Errorf("default quotas.%s = %+v: every default must be a finite limit", name, q)
		}
	}
}

func TestQuotasLoad(t *testing.T) {
	cfg, _ := configtest.Load(t, "", "sessionbus.yaml", `
quotas:
  toolCallsPerSession: {rate: 2.5, burst: 7}
  runsPerAgent: {rate: 0}
`)
	q := cfg.Quotas
	if q.ToolCallsPerSession != (config.Quota{Rate: 2.5, Burst: 7}) {
		t.Errorf("toolCallsPerSession = %+v", q.ToolCallsPerSession)
	}
	if !q.RunsPerAgent.Unlimited() {
		t.Errorf("runsPerAgent = %+v, want unlimited", q.RunsPerAgent)
	}
	// keys not in the file keep their defaults, field by field
	if d := config.DefaultQuotas(); q.ToolCallsPerAgent != d.ToolCallsPerAgent || q.RunsPerAgent.Burst != d.RunsPerAgent.Burst {
		t.Errorf("unset keys: %+v, want the defaults %+v", q, d)
	}
	t.Setenv("SESSIONBUS_QUOTAS_RUNSPERSESSION_RATE", "0.5")
	cfg, _ = configtest.Load(t, "", "sessionbus.yaml", "{}\n")
	if cfg.Quotas.RunsPerSession.Rate != 0.5 {
		t.Errorf("from the environment: runsPerSession.rate = %v, want 0.5", cfg.Quotas.RunsPerSession.Rate)
	}
}

func TestQuotasValidate(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string // want: "" loads, else a part of the error
	}{
		{"unlimited", "toolCallsPerSession: {rate: 0, burst: 0}", ""},
		{"fraction", "runsPerSession: {rate: 0.1, burst: 1}", ""},
		{"negative rate", "toolCallsPerSession: {rate: -1, burst: 10}", "quotas.toolCallsPerSession.rate -1 must be 0 (unlimited) or a positive number"},
		{"no burst", "runsPerAgent: {rate: 5, burst: 0}", "quotas.runsPerAgent.burst 0 must be at least 1 when quotas.runsPerAgent.rate is 5"},
		{"negative burst", "toolCallsPerAgent: {rate: 5, burst: -3}", "quotas.toolCallsPerAgent.burst -3 must not be negative"},
		{"negative burst unlimited", "runsPerSession: {rate: 0, burst: -1}", "quotas.runsPerSession.burst -1 must not be negative"},
		{"not a number", "runsPerSession: {rate: fast, burst: 1}", "rate"},
		{"infinite", "runsPerSession: {rate: .inf, burst: 1}", "quotas.runsPerSession.rate +Inf must be 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sessionbus.yaml")
			if err := os.WriteFile(path, []byte("quotas:\n  "+tc.yaml+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(path, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("loaded; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
