package config

import (
	"fmt"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// DefaultModelProvider is the provider of a model given without one when
// nothing configured names a provider: the openai runtime is the one model
// runtime sessionbus has.
const DefaultModelProvider = "openai"

// ModelEntry is one `agents.defaults.models` item.
type ModelEntry struct {
	Alias string `mapstructure:"alias"`
}

// ModelRef is a model as OpenClaw names one: provider and model id.
type ModelRef struct {
	Provider string
	Model    string
}

// String is "provider/model".
func (r ModelRef) String() string { return r.Provider + "/" + r.Model }

// key is how refs compare: viper folds config map keys to lower case, so a
// configured ref can only be matched without case.
func (r ModelRef) key() string { return strings.ToLower(r.String()) }

// ParseModelRef reads "provider/model", split at the first slash (so
// "openrouter/anthropic/claude" is provider openrouter), or a bare model id,
// which gets defaultProvider. ok is false for an empty ref or an empty part.
func ParseModelRef(raw, defaultProvider string) (ModelRef, bool) {
	raw = strings.TrimSpace(raw)
	provider, model, hasSlash := strings.Cut(raw, "/")
	if !hasSlash {
		provider, model = defaultProvider, raw
	}
	provider, model = strings.ToLower(strings.TrimSpace(provider)), strings.TrimSpace(model)
	if provider == "" || model == "" {
		return ModelRef{}, false
	}
	return ModelRef{Provider: provider, Model: model}, true
}

// AgentModel is the configured default model ref of agent id: its
// agents.list[] model, else the model its openai runtime names (provider
// openai), else agents.defaults.model; "" when none is set.
func (c *Config) AgentModel(agentID string) string {
	for _, a := range c.Agents.List {
		if a.ID != agentID {
			continue
		}
		if m := strings.TrimSpace(a.Model); m != "" {
			return m
		}
		if m, _ := a.OpenAI["model"].(string); strings.EqualFold(a.Runtime, "openai") && strings.TrimSpace(m) != "" {
			return DefaultModelProvider + "/" + strings.TrimSpace(m)
		}
	}
	return strings.TrimSpace(c.Agents.Defaults.Model)
}

// ModelAlias returns the ref an `agents.defaults.models[].alias` names
// (case-insensitive), if any.
func (c *Config) ModelAlias(alias string) (ModelRef, bool) {
	alias = strings.ToLower(strings.TrimSpace(alias))
	for k, e := range c.Agents.Defaults.Models {
		if alias != "" && strings.ToLower(strings.TrimSpace(e.Alias)) == alias {
			return ParseModelRef(k, "")
		}
	}
	return ModelRef{}, false
}

// ModelAllowed reports whether a session of agentID may switch to ref: any
// model when agents.defaults.models is empty, else its refs plus the agent's
// own configured default, as OpenClaw's allowed-model set is built.
func (c *Config) ModelAllowed(agentID string, ref ModelRef) bool {
	if len(c.Agents.Defaults.Models) == 0 {
		return true
	}
	for k := range c.Agents.Defaults.Models {
		if strings.ToLower(k) == ref.key() {
			return true
		}
	}
	def, ok := ParseModelRef(c.AgentModel(agentID), DefaultModelProvider)
	return ok && def.key() == ref.key()
}

// decodeModels reads agents.defaults.models from the raw config map: a ref
// key holds a dot as often as not ("openai/gpt-4.1"), and viper's Unmarshal
// splits keys at dots (and drops empty items), so it cannot carry them.
func decodeModels(v *viper.Viper, c *Config) error {
	raw := v.Get("agents.defaults.models")
	if raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf(`agents.defaults.models must be a map from model refs ("provider/model") to {alias}, got %T`, raw)
	}
	out := make(map[string]ModelEntry, len(m))
	for k, val := range m {
		ref, ok := ParseModelRef(k, "")
		if !ok {
			return fmt.Errorf(`agents.defaults.models key %q must be a model ref "provider/model"`, k)
		}
		var e ModelEntry
		if val != nil {
			if err := mapstructure.Decode(val, &e); err != nil {
				return fmt.Errorf("agents.defaults.models[%q]: %v", k, err)
			}
		}
		out[ref.String()] = e
	}
	c.Agents.Defaults.Models = out
	return nil
}

// validateModels checks the configured default models parse.
func (c *Config) validateModels() error {
	if m := c.Agents.Defaults.Model; strings.TrimSpace(m) != "" {
		if _, ok := ParseModelRef(m, DefaultModelProvider); !ok {
			return fmt.Errorf(`agents.defaults.model %q must be a model ref such as "openai/gpt-4o-mini"`, m)
		}
	}
	for i, a := range c.Agents.List {
		if strings.TrimSpace(a.Model) == "" {
			continue
		}
		if _, ok := ParseModelRef(a.Model, DefaultModelProvider); !ok {
			return fmt.Errorf(`agents.list[%d].model %q must be a model ref such as "openai/gpt-4o-mini"`, i, a.Model)
		}
	}
	return nil
}
