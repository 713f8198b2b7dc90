package bench

import (
	"github.com/sessionbus/sessionbus/config"
)

// benchQuota is every quota of the bench's workers: far above anything a
// benchmark does, so none is throttled, yet finite, so every call still
// goes through the quota check and its cost is in the figures.
var benchQuota = config.Quota{Rate: 1e9, Burst: 1e9}

// benchQuotas are the quotas of the bench's workers (benchQuota each).
func benchQuotas() config.Quotas {
	return config.Quotas{ToolCallsPerSession: benchQuota, ToolCallsPerAgent: benchQuota, RunsPerSession: benchQuota, RunsPerAgent: benchQuota}
}

// quotaNote is what a report says of the quotas; suiteQuotaNote adds the
// one benchmark that runs with others.
const (
	quotaNote      = "every quota rate 1e9/s, burst 1e9: checked on every call, never reached"
	suiteQuotaNote = quotaNote + " (flood_p99 runs a worker of its own with the default rates)"
)
