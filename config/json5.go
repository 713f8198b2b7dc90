package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/viper"
	"github.com/titanous/json5"
)

// isJSONConfig tells whether path is read as JSON5: OpenClaw's config
// (~/.openclaw/openclaw.json) is JSON5 under a .json name, and JSON5 is a
// superset of JSON, so every .json and .json5 file goes through it.
func isJSONConfig(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json", ".json5":
		return true
	}
	return false
}

// readJSON5 loads a JSON5 file into v, after adapting the OpenClaw shapes
// sessionbus reads differently (openClawShapes).
func readJSON5(v *viper.Viper, path string, log *slog.Logger) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json5.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("not valid JSON5: %v", err)
	}
	openClawShapes(m, log)
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	v.SetConfigType("json")
	return v.ReadConfig(bytes.NewReader(b))
}

// openClawShapes rewrites, in place, the values of an OpenClaw config that
// OpenClaw allows in a richer shape than sessionbus reads, so the
// section loads as it is:
//   - a model given as {primary, fallbacks} (agents.defaults.model,
//     agents.defaults.subagents.model, agents.list[].model and
//     agents.list[].subagents.model) is its primary ref (sessionbus has no
//     fallback models);
//   - agents.list[].runtime that is not a string is OpenClaw's runtime
//     object (embedded or ACP harness), not one of sessionbus's runtimes
//     (script, exec, openai): it is dropped, with a warning.
func openClawShapes(m map[string]any, log *slog.Logger) {
	agents, _ := m["agents"].(map[string]any)
	if agents == nil {
		return
	}
	if d, ok := agents["defaults"].(map[string]any); ok {
		primaryModel(d)
		if s, ok := d["subagents"].(map[string]any); ok {
			primaryModel(s)
		}
	}
	list, _ := agents["list"].([]any)
	for i, a := range list {
		a, ok := a.(map[string]any)
		if !ok {
			continue
		}
		primaryModel(a)
		if s, ok := a["subagents"].(map[string]any); ok {
			primaryModel(s)
		}
		if r, ok := a["runtime"]; ok {
			if _, isString := r.(string); !isString {
				log.Warn("OpenClaw runtime object ignored; sessionbus runtimes are script, exec or openai (see docs/runtimes.md)",
					"key", fmt.Sprintf("agents.list[%d].runtime", i))
				delete(a, "runtime")
			}
		}
	}
}

// primaryModel replaces m["model"] = {primary: ref, ...} by ref.
func primaryModel(m map[string]any) {
	if obj, ok := m["model"].(map[string]any); ok {
		if p, ok := obj["primary"].(string); ok {
			m["model"] = p
		} else {
			delete(m, "model")
		}
	}
}
