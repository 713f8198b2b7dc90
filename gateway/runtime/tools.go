package runtime

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
)

// ToolSpec describes one session tool as a model sees it.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is a JSON schema of the tool's main parameters (not every
	// alias the handlers accept: a model needs the common shape, and a
	// smaller schema costs fewer prompt tokens on every round).
	Parameters map[string]any
}

// The one table of session tools: the openai runtime offers these as
// function tools, and script rules may only call these names, so a typo in a
// rule fails at startup rather than as a 404 mid-run. Descriptions follow the
// reference's wording where it has one.
var toolSpecs = []ToolSpec{
	{
		Name:        "sessions_list",
		Description: "List visible sessions with optional filters for kind, recent activity, and last messages. Use this to discover a target session before calling sessions_history or sessions_send.",
		Parameters: object(nil, props{
			"kinds":         arrayOf(enumString("", "main", "group", "cron", "hook", "node", "other"), "Only sessions of these kinds."),
			"limit":         integer(1, "Maximum rows to return (default 100, at most 200)."),
			"offset":        integer(0, "Rows to skip, for paging (use the returned nextOffset)."),
			"activeMinutes": integer(1, "Only sessions updated within this many minutes."),
			"messageLimit":  integerRange(0, 20, "Attach up to this many recent messages per session (0-20)."),
			"label":         str("Only the session with this label."),
			"agentId":       str("Only sessions of this agent."),
			"search":        str("Case-insensitive substring over key, label and names."),
		}),
	},
	{
		Name:        "sessions_history",
		Description: "Fetch sanitized message history for a visible session. Supports limits and optional tool messages.",
		Parameters: object([]string{"sessionKey"}, props{
			"sessionKey":   str("Session key, display key (main), \"current\", or a session id."),
			"limit":        integer(1, "Newest messages to return."),
			"offset":       integer(0, "Page backward: pass the returned nextOffset."),
			"includeTools": boolean("Include tool result messages (default false)."),
		}),
	},
	{
		Name:        "sessions_send",
		Description: "Send a message into another visible session by sessionKey or label. Waits for the target run and returns the updated assistant reply when available.",
		Parameters: object([]string{"message"}, props{
			"sessionKey":     str("Target session key (or label/agentId instead)."),
			"label":          str("Target session label."),
			"agentId":        str("Agent scoping the label; alone, targets that agent's main session."),
			"message":        str("The message to send."),
			"timeoutSeconds": integer(0, "Seconds to wait for the reply (default 30; 0 = do not wait)."),
			"idempotencyKey": str("Same key within the dedupe window returns the first call's runId instead of sending twice."),
		}),
	},
	{
		Name:        "sessions_spawn",
		Description: "Spawn an isolated sub-agent session for a background task. Returns at once with runId and childSessionKey; the result is announced back when the child finishes.",
		Parameters: object([]string{"task"}, props{
			"task":              str("What the sub-agent should do."),
			"label":             str("Label for the child session."),
			"agentId":           str("Agent to run the child as (default: your own agent)."),
			"model":             str("Model override for the child."),
			"runTimeoutSeconds": integer(0, "Child run timeout in seconds (0 = none)."),
			"mode":              enumString("run: one-shot (default); session: persistent.", "run", "session"),
			"cleanup":           enumString("What happens to the child session when done (default keep).", "delete", "keep"),
			"thinking":          str("Thinking level for the child: off, minimal, low, medium, high or xhigh."),
			"context":           enumString("isolated: the child starts clean (default); fork: it starts with a copy of your transcript.", "isolated", "fork"),
			"sandbox":           enumString("inherit (default) or require a sandboxed child.", "inherit", "require"),
			"thread":            boolean("Bind the child to your channel thread (default false)."),
			"idempotencyKey":    str("Same key returns the first call's childSessionKey and runId instead of spawning twice."),
		}),
	},
	{
		Name:        "sessions_yield",
		Description: "End your current turn. Use after spawning subagents to receive their results as the next message.",
		Parameters: object(nil, props{
			"message": str("Optional note (default \"Turn yielded.\")."),
		}),
	},
	{
		Name:        "subagents",
		Description: "List, kill or steer the sub-agents spawned from this session.",
		Parameters: object(nil, props{
			"action":        enumString("What to do (default list).", "list", "kill", "steer"),
			"target":        str("For kill/steer: \"last\", a 1-based index, a child session key, a label, or \"all\" (kill)."),
			"message":       str("For steer: the new instruction (at most 4000 characters)."),
			"recentMinutes": integer(1, "For list: include runs ended within this many minutes (default 30)."),
		}),
	},
	{
		Name:        "session_status",
		Description: "Show the status card of the current or another visible session; optionally set its model.",
		Parameters: object(nil, props{
			"sessionKey":    str("Session to inspect (default: the current session)."),
			"model":         str("Set a per-session model override (\"default\" resets)."),
			"thinkingLevel": str("Set the thinking level (\"default\" resets)."),
			"changesSince":  integer(0, "Include state changes after this stateVersion."),
		}),
	},
	{
		Name:        "agents_list",
		Description: "List OpenClaw agent ids you can target with `sessions_spawn` when `runtime=\"subagent\"` (based on subagent allowlists).",
		Parameters:  object(nil, props{}),
	},
}

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

// Schema helpers keep the table above readable.

type props map[string]any

func object(required []string, p props) map[string]any {
	o := map[string]any{"type": "object", "properties": p, "additionalProperties": false}
	if len(required) > 0 {
		sort.Strings(required)
		o["required"] = required
	}
	return o
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

func boolean(desc string) map[string]any {
	return map[string]any{"type": "boolean", "description": desc}
}

func integer(min int, desc string) map[string]any {
	return map[string]any{"type": "integer", "minimum": min, "description": desc}
}

func integerRange(min, max int, desc string) map[string]any {
	return map[string]any{"type": "integer", "minimum": min, "maximum": max, "description": desc}
}

func enumString(desc string, values ...string) map[string]any {
	e := map[string]any{"type": "string", "enum": values}
	if desc != "" {
		e["description"] = desc
	}
	return e
}

func arrayOf(items map[string]any, desc string) map[string]any {
	return map[string]any{"type": "array", "items": items, "description": desc}
}

// mustJSON is for values this package builds itself, which always marshal.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("runtime: marshal: " + err.Error())
	}
	return b
}
