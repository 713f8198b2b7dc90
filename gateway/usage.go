package gateway

import (
	"github.com/sessionbus/sessionbus/config"
	"github.com/sessionbus/sessionbus/gateway/runtime"
	"github.com/sessionbus/sessionbus/kv/sessions"
)

// turnUsage is what a turn leaves on its session entry: the provider's
// usage, else (a model runtime whose provider reported none) the
// gateway's estimate, the model's window, and the compaction count.
type turnUsage struct {
	usage     *runtime.Usage
	estimated bool // usage is the gateway's estimate, not the provider's
	window    int64
	compacted *compactionEntry
	// contextUsed, without usage, is the context's estimated size after
	// an on-demand compaction: the card's context used
	contextUsed int64
}

// turnUsage is the usage the turn's result reports, or the estimate of its
// context and reply when its runtime read a context and its provider
// reported nothing; nil when there is nothing to record.
func (r *run) turnUsage(res *runtime.Result, reply string) *turnUsage {
	var u *runtime.Usage
	if res != nil {
		u = res.Usage
	}
	tu := &turnUsage{usage: u, compacted: r.compacted}
	if r.tc != nil {
		tu.window = r.tc.limits.ContextWindow
		if u == nil {
			est := &runtime.Usage{Input: r.tc.used, Prompt: r.tc.used, Output: runtime.EstimateText(len(reply))}
			est.LastOutput, est.Calls = est.Output, 1
			tu.usage, tu.estimated = est, true
		}
	} else if u != nil {
		tu.window = r.g.cfg.ModelLimits(r.modelRef()).ContextWindow
	}
	if tu.usage == nil && tu.compacted == nil {
		return nil
	}
	return tu
}

// apply writes the counters OpenClaw keeps on the session entry: the
// turn's input, output and cache tokens, totalTokens the prompt the
// context came to (input and cache, which the status card shows as the
// context used), contextTokens the model's window, and compactionCount.
func (t *turnUsage) apply(e *sessions.Entry) {
	if u := t.usage; u != nil {
		e.InputTokens, e.OutputTokens, e.TotalTokens = u.Input, u.Output, u.Prompt
		e.SetRare(func(rf *sessions.RareFields) { rf.CacheRead, rf.CacheWrite = u.CacheRead, u.CacheWrite })
	}
	if t.usage == nil && t.contextUsed > 0 {
		e.TotalTokens = t.contextUsed
	}
	if t.window > 0 {
		e.ContextTokens = t.window
	}
	if c := t.compacted; c != nil && c.CompactionCount > e.Rares().CompactionCount {
		e.SetRare(func(rf *sessions.RareFields) { rf.CompactionCount = c.CompactionCount })
	}
}

// usageJSON is the provider's usage in the shape OpenClaw records on an
// assistant transcript entry, with the cost in USD when the catalog
// prices the model; nil when the provider reported none.
func usageJSON(u *runtime.Usage, price config.ModelCost) map[string]any {
	if u == nil {
		return nil
	}
	out := map[string]any{
		"input": u.Input, "output": u.Output, "cacheRead": u.CacheRead, "cacheWrite": u.CacheWrite,
		"totalTokens": u.Total(),
	}
	if price.Priced() {
		per := func(n int64, p float64) float64 { return float64(n) * p / 1e6 }
		c := map[string]float64{
			"input": per(u.Input, price.Input), "output": per(u.Output, price.Output),
			"cacheRead": per(u.CacheRead, price.CacheRead), "cacheWrite": per(u.CacheWrite, price.CacheWrite),
		}
		c["total"] = c["input"] + c["output"] + c["cacheRead"] + c["cacheWrite"]
		out["cost"] = c
	}
	return out
}
