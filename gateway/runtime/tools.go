package runtime

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/sessionbus/sessionbus/client/schema"
)

// ToolSpec describes one session tool as a model sees it.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the tool's parameters (package
	// schema; the snake_case aliases the handlers also accept are left out:
	// a model needs one spelling).
	Parameters map[string]any
}

// The session tools' table comes from package schema, the one source of
// the tools' schemas (also served to MCP hosts and on the schema subject):
// the openai runtime offers these as function tools, and script rules may
// only call these names, so a typo in a rule fails at startup rather than as
// a 404 mid-run.
var toolSpecs = func() []ToolSpec {
	var out []ToolSpec
	for _, t := range schema.All() {
		var params map[string]any
		if err := json.Unmarshal(mustJSON(t.Params), &params); err != nil {
			panic("runtime: tool schema of " + t.Name + ": " + err.Error())
		}
		if params["properties"] == nil { // agents_list: no parameters
			params["properties"] = props{}
		}
		out = append(out, ToolSpec{Name: t.Name, Description: t.Description, Parameters: params})
	}
	return out
}()

// ToolSpecs returns the session tools' table (a copy).
func ToolSpecs() []ToolSpec { return append([]ToolSpec(nil), toolSpecs...) }

func toolSpec(name string) (ToolSpec, bool) {
	for _, s := range toolSpecs {
		if s.Name == name {
			return s, true
		}
	}
	return ToolSpec{}, false
}

// ToolNames lists the session tools' names, in table order.
func ToolNames() []string {
	names := make([]string, len(toolSpecs))
	for i, s := range toolSpecs {
		names[i] = s.Name
	}
	return names
}

func toolNames() string { return strings.Join(ToolNames(), ", ") }

// paramCase maps lower-cased parameter names back to the camelCase the
// handlers read. Viper folds config keys to lower case, so a script rule's
// `params: {sessionKey: ...}` arrives as sessionkey, which no handler reads.
// Beyond the schema table it lists the other camelCase names the reference
// gives these tools, so a rule may use them too.
var paramCase = func() map[string]string {
	m := map[string]string{}
	add := func(name string) { m[strings.ToLower(name)] = name }
	for _, s := range toolSpecs {
		for name := range s.Parameters["properties"].(props) {
			add(name)
		}
	}
	for _, name := range []string{
		"activeOnly", "excludeSubagents", "ownerId", "creatorId", "projectId", "workspaceDir",
		"includeDerivedTitles", "includeLastMessage", "resumeSessionId", "streamTo",
		"lightContext", "attachAs", "mountPath", "mimeType", "thinkingLevel",
	} {
		add(name)
	}
	return m
}()

// canonicalParams restores parameter-name case throughout v (nested objects
// too: attachments[].mimeType). Names that are not all lower case were not
// folded and are kept as written.
func canonicalParams(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if c, ok := paramCase[k]; ok {
				k = c
			}
			out[k] = canonicalParams(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = canonicalParams(x)
		}
		return out
	}
	return v
}

// openAITools renders the table as chat-completions function tools; with
// allowed non-nil, only the tools it names.
func openAITools(allowed []string) []map[string]any {
	out := make([]map[string]any, 0, len(toolSpecs))
	for _, s := range toolSpecs {
		if allowed != nil && !slices.Contains(allowed, s.Name) {
			continue
		}
		out = append(out, map[string]any{
			"type": "function",
			"function": map[string]any{
				"name":        s.Name,
				"description": s.Description,
				"parameters":  s.Parameters,
			},
		})
	}
	return out
}

// props is a schema's properties, as decoded from JSON.
type props = map[string]any

// mustJSON is for values this package builds itself, which always marshal.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("runtime: marshal: " + err.Error())
	}
	return b
}
