package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sessionbus/sessionbus/config"
)

// loadQuotas is the quotas section of the tests that drive hundreds of
// calls or sends a second from one session on purpose: they measure
// delivery under load and faults, and the default quotas, which stop a
// runaway loop, would refuse their load. The limits stay finite so the
// check still runs on every call; no such test depends on them.
const loadQuotas = `
quotas:
  toolCallsPerSession: {rate: 1000000, burst: 1000000}
  toolCallsPerAgent: {rate: 1000000, burst: 1000000}
  runsPerSession: {rate: 1000000, burst: 1000000}
  runsPerAgent: {rate: 1000000, burst: 1000000}
`

// loadQuotaConfig is loadQuotas for a config built in Go.
func loadQuotaConfig() config.Quotas {
	q := config.Quota{Rate: 1_000_000, Burst: 1_000_000}
	return config.Quotas{ToolCallsPerSession: q, ToolCallsPerAgent: q, RunsPerSession: q, RunsPerAgent: q}
}

// loadQuotaFile writes loadQuotas to a config file for a worker process.
func loadQuotaFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sessionbus.yaml")
	if err := os.WriteFile(path, []byte(loadQuotas), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
