package config

import (
	"strings"
	"testing"
)

func TestModelsConfig(t *testing.T) {
	c, err := Load(write(t, "sessionbus.yaml", `
agents:
  defaults:
    model: openai/gpt-4o-mini
    models:
      openai/gpt-4.1: {alias: Big}
      anthropic/claude-opus-4-6: {}
  list:
    - {id: main}
    - {id: ops, model: anthropic/claude-sonnet-4-5}
    - {id: llm, runtime: openai, openai: {baseURL: "http://127.0.0.1:1/v1", model: gpt-4o}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Agents.Defaults.Models); n != 2 {
		t.Fatalf("models (a dotted ref and an empty item must both survive): %v", c.Agents.Defaults.Models)
	}
	if got := c.AgentModel("main"); got != "openai/gpt-4o-mini" {
		t.Errorf("main's model = %q", got)
	}
	if got := c.AgentModel("ops"); got != "anthropic/claude-sonnet-4-5" {
		t.Errorf("ops's model = %q", got)
	}
	if got := c.AgentModel("llm"); got != "openai/gpt-4o" {
		t.Errorf("an openai agent's model = %q, want its openai.model", got)
	}
	if got := c.AgentModel("unlisted"); got != "openai/gpt-4o-mini" {
		t.Errorf("an unlisted agent's model = %q", got)
	}
	if ref, ok := c.ModelAlias("big"); !ok || ref.String() != "openai/gpt-4.1" {
		t.Errorf("alias big = %v %v", ref, ok)
	}
	for _, tc := range []struct {
		agent, ref string
		want       bool
	}{
		{"main", "openai/gpt-4.1", true},
		{"main", "Anthropic/Claude-Opus-4-6", true},
		{"main", "openai/gpt-4o-mini", true}, // the agent's own default
		{"main", "anthropic/claude-sonnet-4-5", false},
		{"ops", "anthropic/claude-sonnet-4-5", true},
		{"ops", "openai/gpt-4o-mini", false},
	} {
		ref, _ := ParseModelRef(tc.ref, "")
		if got := c.ModelAllowed(tc.agent, ref); got != tc.want {
			t.Errorf("ModelAllowed(%s, %s) = %v, want %v", tc.agent, tc.ref, got, tc.want)
		}
	}
	if ref, _ := ParseModelRef("x", ""); c.ModelAllowed("main", ref) || !Default().ModelAllowed("main", ref) {
		t.Errorf("an empty models map allows any model, a configured one only its refs")
	}
}

func TestParseModelRef(t *testing.T) {
	for raw, want := range map[string]string{
		"openai/gpt-4o":                 "openai/gpt-4o",
		" OpenAI / gpt-4o ":             "openai/gpt-4o",
		"gpt-4o":                        "dflt/gpt-4o",
		"openrouter/anthropic/claude-3": "openrouter/anthropic/claude-3",
		"":                              "",
		"/gpt":                          "",
		"openai/":                       "",
	} {
		ref, ok := ParseModelRef(raw, "dflt")
		if got := map[bool]string{true: ref.String(), false: ""}[ok]; got != want {
			t.Errorf("ParseModelRef(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestModelsConfigErrors(t *testing.T) {
	for body, want := range map[string]string{
		"agents: {defaults: {models: {gpt: {}}}}\n":           `agents.defaults.models key "gpt" must be a model ref "provider/model"`,
		"agents: {defaults: {models: [openai/gpt]}}\n":        "agents.defaults.models must be a map",
		"agents: {defaults: {model: 'openai/'}}\n":            `agents.defaults.model "openai/" must be a model ref`,
		"agents: {list: [{id: main, model: '/x'}]}\n":         `agents.list[0].model "/x" must be a model ref`,
		"agents: {defaults: {models: {a/b: {alias: [1]}}}}\n": `agents.defaults.models["a/b"]`,
	} {
		_, err := Load(write(t, "sessionbus.yaml", body), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", body, err, want)
		}
	}
}
