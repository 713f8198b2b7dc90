// Package schema holds the session tools' JSON Schemas: each tool's
// parameters and result, derived from the Go types in params.go and
// results.go (which the Go client sends and decodes). The same schemas are
// served in the micro endpoint metadata, on the schema subject (OpenAI
// function-calling format), by `sessionbus schema`, to MCP hosts, and to
// the model by the openai runtime.
package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is one session tool as callers see it.
type Tool struct {
	Name        string
	Description string
	// Params is the JSON Schema of the tool's parameters (OpenClaw's
	// camelCase names; the handlers accept snake_case too).
	Params *jsonschema.Schema
	// Result is the JSON Schema of every reply the tool returns: its result
	// shapes, and the ordinary failure reply {status, error}.
	Result *jsonschema.Schema
}

// def is one tool's row before its schemas are derived.
type def struct {
	name, desc string
	params     reflect.Type
	results    []reflect.Type
	// tune adds what Go types cannot say (enums, minimums).
	tune func(props map[string]*jsonschema.Schema)
}

var failure = reflect.TypeFor[Failure]()

// defs is the one table of session tools, in the order they are offered.
// Descriptions follow OpenClaw's wording where it has one.
var defs = []def{
	{
		name:   "sessions_list",
		desc:   "List visible sessions with optional filters for kind, recent activity, and last messages. Use this to discover a target session before calling sessions_history or sessions_send.",
		params: reflect.TypeFor[SessionsListParams](), results: []reflect.Type{reflect.TypeFor[SessionsListResult]()},
		tune: func(p map[string]*jsonschema.Schema) {
			p["kinds"].Items.Enum = anys("main", "group", "cron", "hook", "node", "other")
			minimum(p, 1, "limit", "activeMinutes")
			minimum(p, 0, "offset", "messageLimit")
			p["messageLimit"].Maximum = ptr(20.0)
			p["archived"].Types, p["archived"].Enum = []string{"boolean", "string"}, []any{false, true, "all"}
		},
	},
	{
		name:   "sessions_history",
		desc:   "Fetch sanitized message history for a visible session. Supports limits and optional tool messages.",
		params: reflect.TypeFor[SessionsHistoryParams](), results: []reflect.Type{reflect.TypeFor[SessionsHistoryResult]()},
		tune: func(p map[string]*jsonschema.Schema) {
			minimum(p, 1, "limit")
			minimum(p, 0, "offset")
		},
	},
	{
		name:   "sessions_search",
		desc:   "Search the transcripts of the sessions you can see for a phrase (user and assistant text). Follow up with sessions_history on a returned sessionKey for the surrounding messages.",
		params: reflect.TypeFor[SessionsSearchParams](), results: []reflect.Type{reflect.TypeFor[SessionsSearchResult]()},
		tune: func(p map[string]*jsonschema.Schema) {
			p["query"].MinLength, p["query"].MaxLength = ptr(1), ptr(512)
			minimum(p, 1, "limit")
			p["limit"].Maximum = ptr(25.0)
			minimum(p, 0, "offset")
			p["offset"].Maximum = ptr(10000.0)
		},
	},
	{
		name:   "sessions_send",
		desc:   "Send a message into another visible session by sessionKey or label. Waits for the target run and returns the updated assistant reply when available.",
		params: reflect.TypeFor[SessionsSendParams](), results: []reflect.Type{reflect.TypeFor[SessionsSendResult]()},
		tune: func(p map[string]*jsonschema.Schema) { minimum(p, 0, "timeoutSeconds") },
	},
	{
		name:   "sessions_spawn",
		desc:   "Spawn an isolated sub-agent session for a background task. Returns at once with runId and childSessionKey; the result is announced back when the child finishes.",
		params: reflect.TypeFor[SessionsSpawnParams](), results: []reflect.Type{reflect.TypeFor[SessionsSpawnResult]()},
		tune: func(p map[string]*jsonschema.Schema) {
			minimum(p, 0, "runTimeoutSeconds", "timeoutSeconds")
			p["runtime"].Enum = anys("subagent", "acp")
			p["mode"].Enum = anys("run", "session")
			p["cleanup"].Enum = anys("delete", "keep")
			p["sandbox"].Enum = anys("inherit", "require")
			p["context"].Enum = anys("isolated", "fork")
			p["streamTo"].Enum = anys("parent")
			p["thinking"].Enum = anys("off", "minimal", "low", "medium", "high", "xhigh")
			p["attachments"].Items.Properties["encoding"].Enum = anys("utf8", "base64")
		},
	},
	{
		name:   "sessions_yield",
		desc:   "End your current turn. Use after spawning subagents to receive their results as the next message.",
		params: reflect.TypeFor[SessionsYieldParams](), results: []reflect.Type{reflect.TypeFor[SessionsYieldResult]()},
	},
	{
		name:   "subagents",
		desc:   "List, kill or steer the sub-agents spawned from this session.",
		params: reflect.TypeFor[SubagentsParams](),
		results: []reflect.Type{reflect.TypeFor[SubagentsListResult](), reflect.TypeFor[SubagentsKillResult](),
			reflect.TypeFor[SubagentsSteerResult]()},
		tune: func(p map[string]*jsonschema.Schema) {
			p["action"].Enum = anys("list", "kill", "steer")
			minimum(p, 1, "recentMinutes")
		},
	},
	{
		name:   "session_status",
		desc:   "Show the status card of the current or another visible session; optionally set its model.",
		params: reflect.TypeFor[SessionStatusParams](), results: []reflect.Type{reflect.TypeFor[SessionStatusResult]()},
		tune: func(p map[string]*jsonschema.Schema) { minimum(p, 0, "changesSince") },
	},
	{
		name:   "agents_list",
		desc:   "List OpenClaw agent ids you can target with `sessions_spawn` when `runtime=\"subagent\"` (based on subagent allowlists).",
		params: reflect.TypeFor[AgentsListParams](), results: []reflect.Type{reflect.TypeFor[AgentsListResult]()},
	},
}

// tools is the table with its schemas, built once: the types are fixed at
// compile time, so a failure is a programming error caught by any test.
var tools = func() []Tool {
	out := make([]Tool, 0, len(defs))
	for _, d := range defs {
		params := mustFor(d.params)
		params.PropertyOrder = nil
		if d.tune != nil {
			d.tune(params.Properties)
		}
		res := &jsonschema.Schema{}
		for _, t := range append(slices.Clone(d.results), failure) {
			res.AnyOf = append(res.AnyOf, mustFor(t))
		}
		out = append(out, Tool{Name: d.name, Description: d.desc, Params: params, Result: res})
	}
	return out
}()

func mustFor(t reflect.Type) *jsonschema.Schema {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("schema: %v: %v", t, err))
	}
	clean(s)
	return s
}

// clean makes the derived schema say what the handlers send: Go's nil
// slices and pointers are omitted (omitempty) or never nil, so "null" is
// dropped from every type, except where null is a real value
// (session_status's modelOverride, which clears an override).
func clean(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) > 0 {
		s.Types = slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
		if len(s.Types) == 1 {
			s.Type, s.Types = s.Types[0], nil
		}
	}
	s.PropertyOrder = nil
	for name, p := range s.Properties {
		if name == "modelOverride" {
			p.Type, p.Types = "", []string{"null", "string"}
			continue
		}
		clean(p)
	}
	clean(s.Items)
	clean(s.AdditionalProperties)
}

func minimum(p map[string]*jsonschema.Schema, min float64, names ...string) {
	for _, n := range names {
		p[n].Minimum = ptr(min)
	}
}

func anys(vs ...string) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// All returns every session tool, in table order (copies: callers may
// change them).
func All() []Tool {
	out := make([]Tool, len(tools))
	for i, t := range tools {
		out[i] = Tool{Name: t.Name, Description: t.Description, Params: t.Params.CloneSchemas(), Result: t.Result.CloneSchemas()}
	}
	return out
}

// Names lists the session tools' names, in table order.
func Names() []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

// Lookup returns the tool named name.
func Lookup(name string) (Tool, bool) {
	for _, t := range All() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Function is one tool in OpenAI's function-calling format
// ({"type":"function","function":{name, description, parameters}}).
type Function struct {
	Type     string       `json:"type"`
	Function FunctionSpec `json:"function"`
}

// FunctionSpec is the function of a Function.
type FunctionSpec struct {
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Parameters  *jsonschema.Schema `json:"parameters"`
}

// OpenAI renders the tools allow admits (all when allow is nil) as
// OpenAI function tools, in table order.
func OpenAI(allow func(name string) bool) []Function {
	out := []Function{}
	for _, t := range tools {
		if allow != nil && !allow(t.Name) {
			continue
		}
		out = append(out, Function{Type: "function", Function: FunctionSpec{Name: t.Name, Description: t.Description, Parameters: t.Params}})
	}
	return out
}

// Metadata is a tool's micro endpoint metadata: its description and
// compact parameter and result schemas, so `nats micro info sessionbus`
// documents every endpoint. All tools' metadata is about 18 KB, within
// one INFO reply (TestSchemasResolveAndMetadataIsSmall keeps it so).
func Metadata(name string) map[string]string {
	t, ok := Lookup(name)
	if !ok {
		return nil
	}
	p, _ := json.Marshal(t.Params)
	r, _ := json.Marshal(t.Result)
	return map[string]string{"description": t.Description, "params_schema": string(p), "result_schema": string(r)}
}
