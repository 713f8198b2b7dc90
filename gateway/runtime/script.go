package runtime

import (
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
	// Yield is the rule form of sessions_yield: call it with this message
	// ("" for the default) and end the turn without a reply. Reply, when
	// set, is used only if the yield is refused.
	Yield *string `mapstructure:"yield"`
}

type scriptToolConfig struct {
	Name   string         `mapstructure:"name"`
	Params map[string]any `mapstructure:"params"`
}

type scriptRuntime struct {
	rules []scriptRule
}

type scriptRule struct {
	re      *regexp.Regexp // nil matches everything
	reply   *template      // nil echoes the message
	delay   time.Duration
	errMsg  *template
	tool    string
	params  paramsTemplate
	hasTool bool
}

func newScript(key string, raw map[string]any) (*scriptRuntime, error) {
	var c scriptConfig
	if err := decodeSection(key, raw, &c); err != nil {
		return nil, err
	}
	s := &scriptRuntime{rules: make([]scriptRule, 0, len(c.Rules))}
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
	if rc.Error != "" && rc.Reply != nil {
		return r, fmt.Errorf("%s: error and reply are exclusive (a failing rule has no reply); remove one", rk)
	}
	var err error
	if rc.Reply != nil {
		if r.reply, err = parseTemplate(rk+".reply", *rc.Reply, groups); err != nil {
			return r, err
		}
	}
	if rc.Error != "" {
		if r.errMsg, err = parseTemplate(rk+".error", rc.Error, groups); err != nil {
			return r, err
		}
	}
	if rc.Yield != nil {
		if rc.Tool != nil {
			return r, fmt.Errorf("%s: yield and tool are exclusive (yield calls %s itself); remove one", rk, YieldTool)
		}
		if rc.Error != "" {
			return r, fmt.Errorf("%s: yield and error are exclusive (a yielding rule ends its turn without failing); remove one", rk)
		}
		params := map[string]any{}
		if *rc.Yield != "" {
			params["message"] = *rc.Yield
		}
		if r.params, err = compileParams(rk+".yield", params, groups); err != nil {
			return r, err
		}
		r.tool, r.hasTool = YieldTool, true
	}
	if rc.Tool != nil {
		name := strings.TrimSpace(rc.Tool.Name)
		if name == "" {
			return r, fmt.Errorf("%s.tool.name: required (one of %s)", rk, toolNames())
		}
		if _, ok := toolSpec(name); !ok {
			return r, fmt.Errorf("%s.tool.name: %s is not a session tool; use one of %s", rk, quoteShort(name), toolNames())
		}
		params := map[string]any{}
		if rc.Tool.Params != nil {
			params = canonicalParams(rc.Tool.Params).(map[string]any)
		}
		if r.params, err = compileParams(rk+".tool.params", params, groups); err != nil {
			return r, err
		}
		r.tool, r.hasTool = name, true
	}
	return r, nil
}

// unprefix drops Go's "error parsing regexp: " so the key's own prefix reads
// as the sentence's subject.
func unprefix(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

// Run applies the first matching rule: wait, call the tool, then fail or
// reply, in that order, so a rule can model "slow tool-using agent". A
// tool call that yields (sessions_yield accepted) ends the turn there,
// without a reply.
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
	if r.hasTool {
		if tools == nil {
			return nil, runErrorf("script: rule calls %s but the gateway gave this turn no tools", r.tool)
		}
		params := r.params.expand(t.Message, groups)
		out, err := tools.Call(ctx, r.tool, params)
		call := ToolCall{Name: r.tool, Params: params, Result: out}
		if err != nil {
			call.Err = err.Error()
		}
		res.ToolCalls = append(res.ToolCalls, call)
		// A thrown tool error is the agent's to live with, as it would be for
		// a model; only a cancelled turn stops here.
		if ctx.Err() != nil {
			return res, fmt.Errorf("script: %s interrupted: %w", r.tool, ctx.Err())
		}
		if err == nil && Yielded(r.tool, out) {
			res.Yielded = true
			return res, nil
		}
	}
	if r.errMsg != nil {
		return res, &RunError{Message: r.errMsg.expand(t.Message, groups)}
	}
	if r.reply == nil {
		res.Reply = t.Message
	} else {
		res.Reply = r.reply.expand(t.Message, groups)
	}
	return res, nil
}

// template is a reply, error or parameter string with {{message}} and {{N}}
// placeholders, split once at startup so expanding costs one pass, and so a
// message that itself contains "{{1}}" is inserted literally, never expanded.
type template struct {
	parts []tmplPart
}

type tmplPart struct {
	lit   string
	group int // -1: literal, -2: message, N >= 0: capture group N
}

var placeholderRe = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

func parseTemplate(key, s string, groups int) (*template, error) {
	t := &template{}
	last := 0
	for _, m := range placeholderRe.FindAllStringSubmatchIndex(s, -1) {
		name := s[m[2]:m[3]]
		var g int
		switch n, err := strconv.Atoi(name); {
		case name == "message":
			g = -2
		case err == nil:
			if n > groups {
				return nil, fmt.Errorf("%s: uses {{%d}} but match has %s", key, n, groupCount(groups))
			}
			g = n
		default:
			return nil, fmt.Errorf("%s: unknown placeholder {{%s}}; use {{message}} or {{N}} (a capture group of match)", key, name)
		}
		if m[0] > last {
			t.parts = append(t.parts, tmplPart{lit: s[last:m[0]], group: -1})
		}
		t.parts = append(t.parts, tmplPart{group: g})
		last = m[1]
	}
	if last < len(s) {
		t.parts = append(t.parts, tmplPart{lit: s[last:], group: -1})
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
	return len(t.parts) == 0 || (len(t.parts) == 1 && t.parts[0].group == -1)
}

func (t *template) expand(message string, groups []string) string {
	if len(t.parts) == 1 && t.parts[0].group == -1 {
		return t.parts[0].lit
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch {
		case p.group == -1:
			b.WriteString(p.lit)
		case p.group == -2:
			b.WriteString(message)
		case p.group < len(groups):
			b.WriteString(groups[p.group])
		case p.group == 0:
			// A rule without match has no groups; {{0}} is then the message,
			// which is what ".*" would have matched.
			b.WriteString(message)
		}
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
			t, err := parseTemplate(k, v, groups)
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

func stripLeaves(v any) any { return fill(v, "", nil) }

func (p paramsTemplate) expand(message string, groups []string) json.RawMessage {
	if p.fixed != nil {
		return p.fixed
	}
	return mustJSON(fill(p.tree, message, groups))
}

func fill(v any, message string, groups []string) any {
	switch v := v.(type) {
	case paramsLeaf:
		return v.t.expand(message, groups)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = fill(x, message, groups)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = fill(x, message, groups)
		}
		return out
	}
	return v
}
