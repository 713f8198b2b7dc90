package config

import (
	"fmt"
	"math"
	"slices"
)

// Quotas is sessionbus's own `quotas` section (OpenClaw's rate limits guard
// failed logins and control-plane writes, nothing per session): token
// buckets per caller on one worker, for tool calls and for runs queued.
type Quotas struct {
	ToolCallsPerSession Quota `mapstructure:"toolCallsPerSession"`
	ToolCallsPerAgent   Quota `mapstructure:"toolCallsPerAgent"`
	RunsPerSession      Quota `mapstructure:"runsPerSession"`
	RunsPerAgent        Quota `mapstructure:"runsPerAgent"`
}

// Quota is one token bucket: Rate tokens per second refill it up to Burst.
// Rate 0 is unlimited (Burst is then ignored).
type Quota struct {
	Rate  float64 `mapstructure:"rate"`
	Burst int     `mapstructure:"burst"`
}

// Unlimited reports whether q allows everything (rate 0).
func (q Quota) Unlimited() bool { return q.Rate == 0 }

// DefaultQuotas are far above what an agent driven by a model does (a turn
// takes seconds and calls a handful of tools) and far below what a loop
// does (thousands of calls a second): a runaway meets them within a second
// or two, a real agent never. Per agent they are higher, as one agent may
// hold thousands of sessions (one per human sender).
func DefaultQuotas() Quotas {
	return Quotas{
		ToolCallsPerSession: Quota{Rate: 20, Burst: 200},
		ToolCallsPerAgent:   Quota{Rate: 500, Burst: 5000},
		RunsPerSession:      Quota{Rate: 1, Burst: 60},
		RunsPerAgent:        Quota{Rate: 50, Burst: 1000},
	}
}

// ByKey is every quota by its config key.
func (q Quotas) ByKey() map[string]Quota {
	return map[string]Quota{
		"quotas.toolCallsPerSession": q.ToolCallsPerSession,
		"quotas.toolCallsPerAgent":   q.ToolCallsPerAgent,
		"quotas.runsPerSession":      q.RunsPerSession,
		"quotas.runsPerAgent":        q.RunsPerAgent,
	}
}

// validate refuses a quota that cannot be a token bucket; the error names
// the key and an example, in the order of the keys.
func (q Quotas) validate() error {
	all := q.ByKey()
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := all[k].validate(k); err != nil {
			return err
		}
	}
	return nil
}

func (q Quota) validate(key string) error {
	if q.Rate < 0 || math.IsNaN(q.Rate) || math.IsInf(q.Rate, 0) {
		return fmt.Errorf("%s.rate %v must be 0 (unlimited) or a positive number per second, such as 20", key, q.Rate)
	}
	if q.Burst < 0 {
		return fmt.Errorf("%s.burst %d must not be negative: it is how many a caller may do at once, such as 200", key, q.Burst)
	}
	if q.Rate > 0 && q.Burst < 1 {
		return fmt.Errorf("%s.burst %d must be at least 1 when %s.rate is %v: with no burst nothing would ever pass (set rate 0 for no limit)", key, q.Burst, key, q.Rate)
	}
	return nil
}
