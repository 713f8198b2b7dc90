package config

import (
	"fmt"
	"strings"
)

// Defaults of the model catalog and of compaction, OpenClaw's: a model the
// catalog does not list is taken to have a 200k window and an 8192-token
// reply, and compaction keeps a reserve of max(reserveTokens,
// reserveTokensFloor) free for the reply and keeps about keepRecentTokens of
// the newest entries verbatim.
const (
	DefaultContextWindow      = 200_000
	DefaultMaxTokens          = 8192
	DefaultReserveTokens      = 16384
	DefaultKeepRecentTokens   = 20000
	DefaultReserveTokensFloor = 20000
)

// Models is OpenClaw's `models` section: the provider catalog. Only what
// sessionbus reads is declared; a provider's other keys (baseUrl, apiKey,
// api) are ignored, so an OpenClaw section loads as it is.
type Models struct {
	Providers map[string]ModelProvider `mapstructure:"providers"`
}

// ModelProvider is one `models.providers.<id>`.
type ModelProvider struct {
	Models []CatalogModel `mapstructure:"models"`
}

// CatalogModel is one `models.providers.<id>.models[]` item.
type CatalogModel struct {
	ID            string    `mapstructure:"id"`
	Name          string    `mapstructure:"name"`
	ContextWindow int64     `mapstructure:"contextWindow"`
	MaxTokens     int64     `mapstructure:"maxTokens"`
	Cost          ModelCost `mapstructure:"cost"`
}

// ModelCost is a model's price in USD per million tokens, OpenClaw's
// fields. All zero: no price known, and no cost is shown.
type ModelCost struct {
	Input      float64 `mapstructure:"input"`
	Output     float64 `mapstructure:"output"`
	CacheRead  float64 `mapstructure:"cacheRead"`
	CacheWrite float64 `mapstructure:"cacheWrite"`
}

// Priced reports whether the catalog gives the model a price.
func (c ModelCost) Priced() bool {
	return c.Input > 0 || c.Output > 0 || c.CacheRead > 0 || c.CacheWrite > 0
}

// Compaction is `agents.defaults.compaction`.
type Compaction struct {
	ReserveTokens      int64 `mapstructure:"reserveTokens"`
	KeepRecentTokens   int64 `mapstructure:"keepRecentTokens"`
	ReserveTokensFloor int64 `mapstructure:"reserveTokensFloor"`
}

// ModelLimits is what a turn needs to know of its model.
type ModelLimits struct {
	// Known: the catalog lists the model; else the defaults apply.
	Known         bool
	ContextWindow int64
	MaxTokens     int64
	Cost          ModelCost
}

// ModelLimits looks ref ("provider/model" or a bare id) up in the catalog:
// under its provider, or, for a bare id or a provider the catalog lacks,
// under any provider that lists the id. A model not listed gets the
// default window and reply size.
func (c *Config) ModelLimits(ref string) ModelLimits {
	out := ModelLimits{ContextWindow: DefaultContextWindow, MaxTokens: DefaultMaxTokens}
	provider, id, hasSlash := strings.Cut(strings.TrimSpace(ref), "/")
	if !hasSlash {
		provider, id = "", provider
	}
	provider = strings.ToLower(provider)
	var found *CatalogModel
	for p, prov := range c.Models.Providers {
		for i := range prov.Models {
			m := &prov.Models[i]
			if !strings.EqualFold(m.ID, id) {
				continue
			}
			if strings.EqualFold(p, provider) {
				found = m
				break
			}
			if found == nil {
				found = m
			}
		}
	}
	if found == nil {
		return out
	}
	out.Known, out.Cost = true, found.Cost
	if found.ContextWindow > 0 {
		out.ContextWindow = found.ContextWindow
	}
	if found.MaxTokens > 0 {
		out.MaxTokens = found.MaxTokens
	}
	return out
}

// ModelCataloged reports whether agentID's session may run ref as far as
// the provider catalog knows it: any model when the catalog lists none;
// else a model listed under ref's provider, or the agent's configured
// default (which the operator chose, catalog or not).
func (c *Config) ModelCataloged(agentID string, ref ModelRef) bool {
	listed := false
	for p, prov := range c.Models.Providers {
		for _, m := range prov.Models {
			listed = true
			if strings.EqualFold(p, ref.Provider) && strings.EqualFold(m.ID, ref.Model) {
				return true
			}
		}
	}
	if !listed {
		return true
	}
	def, ok := ParseModelRef(c.AgentModel(agentID), DefaultModelProvider)
	return ok && def.key() == ref.key()
}

// Reserve is the reply reserve compaction keeps free in a window:
// max(reserveTokens, reserveTokensFloor), but at most half the window, so a
// small window still holds a context.
func (c Compaction) Reserve(window int64) int64 {
	r := max(c.ReserveTokens, c.ReserveTokensFloor)
	return min(r, window/2)
}

// validateCatalog checks the catalog's numbers and the compaction keys.
func (c *Config) validateCatalog() error {
	for p, prov := range c.Models.Providers {
		for i, m := range prov.Models {
			key := fmt.Sprintf("models.providers.%s.models[%d]", p, i)
			switch {
			case strings.TrimSpace(m.ID) == "":
				return fmt.Errorf("%s.id: required, the model id the provider serves", key)
			case m.ContextWindow < 0:
				return fmt.Errorf("%s.contextWindow: must be 0 (the default, %d) or more, got %d", key, DefaultContextWindow, m.ContextWindow)
			case m.MaxTokens < 0:
				return fmt.Errorf("%s.maxTokens: must be 0 (the default, %d) or more, got %d", key, DefaultMaxTokens, m.MaxTokens)
			case m.Cost.Input < 0 || m.Cost.Output < 0 || m.Cost.CacheRead < 0 || m.Cost.CacheWrite < 0:
				return fmt.Errorf("%s.cost: prices are USD per million tokens and must be 0 or more", key)
			}
		}
	}
	cp := c.Agents.Defaults.Compaction
	for name, v := range map[string]int64{"reserveTokens": cp.ReserveTokens, "keepRecentTokens": cp.KeepRecentTokens, "reserveTokensFloor": cp.ReserveTokensFloor} {
		if v < 0 {
			return fmt.Errorf("agents.defaults.compaction.%s: must be 0 or more, got %d", name, v)
		}
	}
	return nil
}
