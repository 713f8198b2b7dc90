package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// scriptConfig is agents.list[].script.
type scriptConfig struct {
	Rules []scriptRuleConfig `mapstructure:"rules"`
	// Summary is the compaction summary the script's "model" writes; unset,
	// the script runtime cannot compact a session.
	Summary *string `mapstructure:"summary"`
}

type scriptRuleConfig struct {
	// Match is optional: a rule without one matches every message, which
	// makes a catch-all last rule easy to write.
	Match *string `mapstructure:"match"`
	// Reply nil means "reply with the message itself", like no match at all;
	// "" is a deliberate empty reply.
	Reply   *string           `mapstructure:"reply"`
	DelayMs int               `mapstructure:"delayMs"`
	Error   string            `mapstructure:"error"`
	Tool    *scriptToolConfig `mapstructure:"tool"`
	// Tools is several tool calls, made in order (tool is the one-call
	// form): what a model does when it spawns three children in one turn.
	Tools []scriptToolConfig `mapstructure:"tools"`
	// Yield is the rule form of sessions_yield: call it with this message
	// ("" for the default) and end the turn without a reply. Reply, when
	// set, is used only if the yield is refused.
	Yield *string `mapstructure:"yield"`
	// Usage is the provider usage the rule's turn reports, so tests drive
	// the usage and compaction paths without a model.
	Usage *scriptUsage `mapstructure:"usage"`
}

// scriptUsage is a rule's declared usage, in OpenClaw's fields.
type scriptUsage struct {
	Input      int64 `mapstructure:"input"`
	Output     int64 `mapstructure:"output"`
	CacheRead  int64 `mapstructure:"cacheRead"`
	CacheWrite int64 `mapstructure:"cacheWrite"`
}

type scriptToolConfig struct {
	Name   string         `mapstructure:"name"`
	Params map[string]any `mapstructure:"params"`
}

type scriptRuntime struct {
	rules   []scriptRule
	summary *string
}

type scriptRule struct {
	re     *regexp.Regexp // nil matches everything
	reply  *template      // nil echoes the message
	delay  time.Duration
	errMsg *template
	calls  []scriptCall // tool, tools or yield, in order
	usage  *Usage
}

// scriptCall is one tool call of a rule.
type scriptCall struct {
	tool   string
	params paramsTemplate
}

func newScript(key string, raw map[string]any) (*scriptRuntime, error) {
	var c scriptConfig
	if err := decodeSection(key, raw, &c); err != nil {
		return nil, err
	}
	s := &scriptRuntime{rules: make([]scriptRule, 0, len(c.Rules)), summary: c.Summary}
	for i, rc := range c.Rules {
		rk := fmt.Sprintf("%s.rules[%d]", key, i)
		r, err := compileRule(rk, rc)
		if err != nil {
			return nil, err
		}
		s.rules = append(s.rules, r)
	}
	return s, nil
}

func compileRule(rk string, rc scriptRuleConfig) (scriptRule, error) {
	var r scriptRule
	groups := 0
	if rc.Match != nil {
		re, err := regexp.Compile(*rc.Match)
		if err != nil {
			return r, fmt.Errorf("%s.match: invalid regexp: %v", rk, unprefix(err))
		}
		r.re, groups = re, re.NumSubexp()
	}
	if rc.DelayMs < 0 {
		return r, fmt.Errorf("%s.delayMs: must be 0 or more, got %d", rk, rc.DelayMs)
	}
	r.delay = time.Duration(rc.DelayMs) * time.Millisecond
	if u := rc.Usage; u != nil {
		if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 {
			return r, fmt.Errorf("%s.usage: token counts must be 0 or more", rk)
		}
		r.usage = &Usage{}
		r.usage.add(Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite})
	}
	if rc.Error != "" && rc.Reply != nil {
		return r, fmt.Errorf("%s: error and reply are exclusive (a failing rule has no reply); remove one", rk)
	}
	if rc.Tool != nil && rc.Tools != nil {
		return r, fmt.Errorf("%s: tool and tools are exclusive (tool is the one-call form of tools); use one", rk)
	}
	if rc.Tools != nil && len(rc.Tools) == 0 {
		return r, fmt.Errorf("%s.tools: empty; list at least one {name, params} or remove it", rk)
	}
	var err error
	if rc.Yield != nil {
		if rc.Tool != nil {
			return r, fmt.Errorf("%s: yield and tool are exclusive (yield calls %s itself); remove one", rk, YieldTool)
		}
		if rc.Tools != nil {
			return r, fmt.Errorf("%s: yield and tools are exclusive; end tools with {name: %s} instead", rk, YieldTool)
		}
		if rc.Error != "" {
			return r, fmt.Errorf("%s: yield and error are exclusive (a yielding rule ends its turn without failing); remove one", rk)
		}
		params := map[string]any{}
		if *rc.Yield != "" {
			params["message"] = *rc.Yield
		}
		c := scriptCall{tool: YieldTool}
		if c.params, err = compileParams(rk+".yield", params, groups); err != nil {
			return r, err
		}
		r.calls = append(r.calls, c)
	}
	if rc.Tool != nil {
		c, err := compileCall(rk+".tool", *rc.Tool, groups)
		if err != nil {
			return r, err
		}
		r.calls = append(r.calls, c)
	}
	for i, tc := range rc.Tools {
		c, err := compileCall(fmt.Sprintf("%s.tools[%d]", rk, i), tc, groups)
		if err != nil {
			return r, err
		}
		r.calls = append(r.calls, c)
	}
	// {{result}} is the last call's result: only a rule that calls a tool
	// has one.
	tmpl := tmplScope{groups: groups, result: len(r.calls) > 0}
	if rc.Reply != nil {
		if r.reply, err = parseTemplate(rk+".reply", *rc.Reply, tmpl); err != nil {
			return r, err
		}
	}
	if rc.Error != "" {
		if r.errMsg, err = parseTemplate(rk+".error", rc.Error, tmpl); err != nil {
			return r, err
		}
	}
	return r, nil
}

func compileCall(key string, tc scriptToolConfig, groups int) (scriptCall, error) {
	name := strings.TrimSpace(tc.Name)
	if name == "" {
		return scriptCall{}, fmt.Errorf("%s.name: required (one of %s)", key, toolNames())
	}
	if _, ok := toolSpec(name); !ok {
		return scriptCall{}, fmt.Errorf("%s.name: %s is not a session tool; use one of %s", key, quoteShort(name), toolNames())
	}
	params := map[string]any{}
	if tc.Params != nil {
		params = canonicalParams(tc.Params).(map[string]any)
	}
	pt, err := compileParams(key+".params", params, groups)
	if err != nil {
		return scriptCall{}, err
	}
	return scriptCall{tool: name, params: pt}, nil
}

// unprefix drops Go's "error parsing regexp: " so the key's own prefix reads
// as the sentence's subject.
func unprefix(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

// Run applies the first matching rule: wait, call the tools, then fail or
// reply, in that order, so a rule can model "slow tool-using agent". A
// tool call that yields (sessions_yield accepted) ends the turn there,
// without a reply and without the calls after it.
func (s *scriptRuntime) Run(ctx context.Context, t Turn, tools Tools) (*Result, error) {
	for _, r := range s.rules {
		var groups []string
		if r.re != nil {
			if groups = r.re.FindStringSubmatch(t.Message); groups == nil {
				continue
			}
		}
		return r.run(ctx, t, groups, tools)
	}
	if t.Emit != nil {
		for _, w := range words(t.Message) {
			t.emitText(w)
		}
	}
	return &Result{Reply: t.Message}, nil
}

func (r *scriptRule) run(ctx context.Context, t Turn, groups []string, tools Tools) (*Result, error) {
	if r.delay > 0 {
		timer := time.NewTimer(r.delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("script: delay interrupted: %w", ctx.Err())
		}
	}
	res := &Result{}
	if r.usage != nil {
		u := *r.usage
		res.Usage = &u
	}
	v := tmplVars{message: t.Message, groups: groups}
	if len(r.calls) > 0 && tools == nil {
		return nil, runErrorf("script: rule calls %s but the gateway gave this turn no tools", r.calls[0].tool)
	}
	for _, c := range r.calls {
		params := c.params.expand(v)
		t.emitToolCall(c.tool, params)
		out, err := tools.Call(ctx, c.tool, params)
		call := ToolCall{Name: c.tool, Params: params, Result: out}
		v.result, v.resultErr = out, ""
		if err != nil {
			call.Err = err.Error()
			v.resultErr = call.Err
		}
		res.ToolCalls = append(res.ToolCalls, call)
		t.emitToolResult(call)
		// A thrown tool error is the agent's to live with, as it would be for
		// a model; only a cancelled turn stops here.
		if ctx.Err() != nil {
			return res, fmt.Errorf("script: %s interrupted: %w", c.tool, ctx.Err())
		}
		if err == nil && Yielded(c.tool, out) {
			res.Yielded = true
			return res, nil
		}
	}
	if r.errMsg != nil {
		return res, &RunError{Message: r.errMsg.expand(v)}
	}
	if r.reply == nil {
		res.Reply = t.Message
	} else {
		res.Reply = r.reply.expand(v)
	}
	if t.Emit != nil {
		for _, w := range words(res.Reply) {
			t.emitText(w)
		}
	}
	return res, nil
}

// CanSummarize reports whether script.summary is configured.
func (s *scriptRuntime) CanSummarize() bool { return s.summary != nil }

// Summarize returns script.summary: the script runtime's stand-in for a
// model's compaction summary.
func (s *scriptRuntime) Summarize(_ context.Context, _ SummaryRequest) (string, *Usage, error) {
	if s.summary == nil {
		return "", nil, runErrorf("script: no script.summary is configured, so this agent cannot compact; set one")
	}
	if strings.TrimSpace(*s.summary) == "" {
		return "", nil, runErrorf("script: script.summary is empty; the session was not compacted")
	}
	return *s.summary, nil, nil
}

// words splits s into its words, each with the white space after it, so
// the script runtime streams a reply in several deltas, as a model does,
// and the deltas put together are s exactly.
func words(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexAny(s, " \t\n")
		if i < 0 {
			return append(out, s)
		}
		j := i + 1
		for j < len(s) && strings.IndexByte(" \t\n", s[j]) >= 0 {
			j++
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}

// template is a reply, error or parameter string with {{message}}, {{N}}
// and (reply and error only) {{result}} placeholders, split once at startup
// so expanding costs one pass, and so a message that itself contains "{{1}}"
// is inserted literally, never expanded.
type template struct {
	parts []tmplPart
}

type tmplPart struct {
	lit   string
	group int    // partLit, partMessage, partResult, or N >= 0: capture group N
	field string // partResult: the result's top-level field ("": all of it)
}

const (
	partLit     = -1
	partMessage = -2
	partResult  = -3
)

// tmplScope is what a template may refer to.
type tmplScope struct {
	groups int  // capture groups of match
	result bool // the rule calls a tool: {{result}} is its last result
	params bool // a tool parameter, expanded before the call: no result
}

// tmplVars is what a template is expanded with.
type tmplVars struct {
	message   string
	groups    []string
	result    json.RawMessage // the last tool call's result
	resultErr string          // or its thrown error
}

// resultField names a top-level field of the result: {{result.text}}.
const resultField = `result\.[A-Za-z0-9_]+`

var placeholderRe = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+|` + resultField + `)\s*\}\}`)

func parseTemplate(key, s string, scope tmplScope) (*template, error) {
	t := &template{}
	last := 0
	for _, m := range placeholderRe.FindAllStringSubmatchIndex(s, -1) {
		name := s[m[2]:m[3]]
		p := tmplPart{}
		switch n, err := strconv.Atoi(name); {
		case name == "message":
			p.group = partMessage
		case name == "result" || strings.HasPrefix(name, "result."):
			if scope.params {
				return nil, fmt.Errorf("%s: uses {{%s}}, which tool params cannot: {{result}} is the result of the rule's last tool call, for reply and error only", key, name)
			}
			if !scope.result {
				return nil, fmt.Errorf("%s: uses {{%s}} but the rule calls no tool; {{result}} is the result of the rule's last tool call, in reply and error only", key, name)
			}
			p.group, p.field = partResult, strings.TrimPrefix(strings.TrimPrefix(name, "result"), ".")
		case err == nil:
			if n > scope.groups {
				return nil, fmt.Errorf("%s: uses {{%d}} but match has %s", key, n, groupCount(scope.groups))
			}
			p.group = n
		default:
			return nil, fmt.Errorf("%s: unknown placeholder {{%s}}; use {{message}} or {{N}} (a capture group of match), or in reply and error {{result}} / {{result.FIELD}}", key, name)
		}
		if m[0] > last {
			t.parts = append(t.parts, tmplPart{lit: s[last:m[0]], group: partLit})
		}
		t.parts = append(t.parts, p)
		last = m[1]
	}
	if last < len(s) {
		t.parts = append(t.parts, tmplPart{lit: s[last:], group: partLit})
	}
	return t, nil
}

func groupCount(n int) string {
	switch n {
	case 0:
		return "no capture groups (only {{0}}, the whole match, and {{message}} are available)"
	case 1:
		return "1 capture group"
	}
	return strconv.Itoa(n) + " capture groups"
}

func (t *template) constant() bool {
	return len(t.parts) == 0 || (len(t.parts) == 1 && t.parts[0].group == partLit)
}

func (t *template) expand(v tmplVars) string {
	if len(t.parts) == 1 && t.parts[0].group == partLit {
		return t.parts[0].lit
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch {
		case p.group == partLit:
			b.WriteString(p.lit)
		case p.group == partMessage:
			b.WriteString(v.message)
		case p.group == partResult:
			b.WriteString(v.resultText(p.field))
		case p.group < len(v.groups):
			b.WriteString(v.groups[p.group])
		case p.group == 0:
			// A rule without match has no groups; {{0}} is then the message,
			// which is what ".*" would have matched.
			b.WriteString(v.message)
		}
	}
	return b.String()
}

// resultText is {{result}}: the last call's result as compact JSON (its
// thrown error's text when it threw), or with a field, that top-level
// field: a string as it is, any other value as compact JSON, "" when the
// result has no such field.
func (v tmplVars) resultText(field string) string {
	if v.resultErr != "" {
		if field == "" {
			return v.resultErr
		}
		return ""
	}
	raw := v.result
	if field != "" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(v.result, &obj) != nil {
			return ""
		}
		raw = obj[field]
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// paramsTemplate is tool params with placeholders in string values. Params
// without any are marshalled once, which keeps scripted benchmarks cheap.
type paramsTemplate struct {
	fixed json.RawMessage
	tree  any
}

type paramsLeaf struct{ t *template }

func compileParams(key string, params map[string]any, groups int) (paramsTemplate, error) {
	dynamic := false
	var walk func(k string, v any) (any, error)
	walk = func(k string, v any) (any, error) {
		switch v := v.(type) {
		case string:
			t, err := parseTemplate(k, v, tmplScope{groups: groups, params: true})
			if err != nil {
				return nil, err
			}
			if t.constant() {
				return v, nil
			}
			dynamic = true
			return paramsLeaf{t}, nil
		case map[string]any:
			out := make(map[string]any, len(v))
			// Sorted so the first error reported is the same on every start.
			keys := make([]string, 0, len(v))
			for name := range v {
				keys = append(keys, name)
			}
			sort.Strings(keys)
			for _, name := range keys {
				x, err := walk(k+"."+name, v[name])
				if err != nil {
					return nil, err
				}
				out[name] = x
			}
			return out, nil
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				y, err := walk(fmt.Sprintf("%s[%d]", k, i), x)
				if err != nil {
					return nil, err
				}
				out[i] = y
			}
			return out, nil
		}
		return v, nil
	}
	tree, err := walk(key, params)
	if err != nil {
		return paramsTemplate{}, err
	}
	if !dynamic {
		b, err := json.Marshal(tree)
		if err != nil {
			return paramsTemplate{}, fmt.Errorf("%s: not representable as JSON: %v", key, err)
		}
		return paramsTemplate{fixed: b}, nil
	}
	if _, err := json.Marshal(stripLeaves(tree)); err != nil {
		return paramsTemplate{}, fmt.Errorf("%s: not representable as JSON: %v", key, err)
	}
	return paramsTemplate{tree: tree}, nil
}

func stripLeaves(v any) any { return fill(v, tmplVars{}) }

func (p paramsTemplate) expand(vars tmplVars) json.RawMessage {
	if p.fixed != nil {
		return p.fixed
	}
	return mustJSON(fill(p.tree, vars))
}

func fill(v any, vars tmplVars) any {
	switch v := v.(type) {
	case paramsLeaf:
		return v.t.expand(vars)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = fill(x, vars)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = fill(x, vars)
		}
		return out
	}
	return v
}
