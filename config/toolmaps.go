package config

import (
	"fmt"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// decodeToolMaps reads the tool policy maps whose keys may hold a dot
// (tools.byProvider["openai/gpt-4.1"], agents.list[].tools.byProvider,
// channels.<channel>.groups.<groupId>) from the raw config map: viper's
// Unmarshal splits keys at dots, so it cannot carry them.
func decodeToolMaps(v *viper.Viper, c *Config) error {
	bp, err := decodeByProvider("tools.byProvider", v.Get("tools.byProvider"))
	if err != nil {
		return err
	}
	c.Tools.ByProvider = bp
	list, _ := v.Get("agents.list").([]any)
	for i := range c.Agents.List {
		if i >= len(list) || c.Agents.List[i].Tools == nil {
			continue
		}
		item, _ := list[i].(map[string]any)
		tools, _ := getFold(item, "tools").(map[string]any)
		key := fmt.Sprintf("agents.list[%d].tools.byProvider", i)
		if c.Agents.List[i].Tools.ByProvider, err = decodeByProvider(key, getFold(tools, "byProvider")); err != nil {
			return err
		}
	}
	raw := v.Get("channels")
	if raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("channels must be a map from channel names to channel settings, got %T", raw)
	}
	out := make(map[string]Channel, len(m))
	for name, val := range m {
		var ch Channel
		if val != nil {
			if err := mapstructure.Decode(val, &ch); err != nil {
				return fmt.Errorf("channels.%s: %v (groups.<groupId> takes tools: {allow, alsoAllow, deny} and toolsBySender: {<sender>: {allow, alsoAllow, deny}})", name, err)
			}
		}
		out[strings.ToLower(name)] = ch
	}
	c.Channels = out
	return nil
}

// decodeByProvider reads one byProvider map: provider ids or
// "provider/model" refs to {profile, allow, alsoAllow, deny}.
func decodeByProvider(key string, raw any) (map[string]ToolPolicy, error) {
	if raw == nil {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf(`%s must be a map from providers ("openai") or models ("openai/gpt-4.1") to {profile, allow, alsoAllow, deny}, got %T`, key, raw)
	}
	out := make(map[string]ToolPolicy, len(m))
	for k, val := range m {
		name := strings.ToLower(strings.TrimSpace(k))
		if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
			return nil, fmt.Errorf(`%s key %q must be a provider ("openai") or a model ref ("openai/gpt-4.1")`, key, k)
		}
		var p ToolPolicy
		if val != nil {
			if err := mapstructure.Decode(val, &p); err != nil {
				return nil, fmt.Errorf("%s[%s]: %v", key, k, err)
			}
		}
		if err := validToolProfile(fmt.Sprintf("%s[%s].profile", key, k), &p.Profile); err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, nil
}

// getFold is m[key] with the key matched without case: viper folds the
// keys of maps, not always those of maps inside lists.
func getFold(m map[string]any, key string) any {
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}
