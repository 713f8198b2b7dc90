package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Params are a tool call's decoded JSON parameters. Numbers are json.Number
// (ParseParams uses UseNumber) so integer checks see the digits the caller
// sent rather than a float64 approximation; float64 and Go integers are also
// accepted for maps built in code.
//
// Every reader looks up the camelCase name first, then its snake_case alias
// (sessionKey, session_key). JSON null counts as absent, so a null camelCase
// value falls through to the alias. Errors are *InputError.
type Params map[string]any

const paramsExample = `{"sessionKey":"agent:main:main"}`

// ParseParams decodes a request body. An empty (or all-whitespace) body is
// the empty parameter set, since tools with no required parameters are
// legitimately called without one (a bare `nats req`). Any JSON value other
// than an object, null included, is refused: OpenClaw's tools take a
// parameters object, and reading null as {} would run a call the caller
// never described.
func ParseParams(body []byte) (Params, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Params{}, nil
	}
	if err := checkEnvelope(body); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalidJSON(err)
	}

	if _, err := dec.Token(); err != io.EOF {
		return nil, inputError("invalid JSON: unexpected data after the parameters object; send exactly one JSON object, e.g. " + paramsExample)
	}
	if m, ok := v.(map[string]any); ok {
		if err := checkAliases(m); err != nil {
			return nil, err
		}
		return Params(m), nil
	}
	return nil, inputError("request body must be a JSON object of tool parameters, not " + jsonKind(v) +
		"; send {} to call without parameters, or e.g. " + paramsExample)
}

// checkAliases refuses a body that sends one parameter under both its
// names (sessionKey and session_key): the readers take the camelCase one,
// so the other would be dropped without a word, and a caller who meant it
// would act on the wrong session. Only keys with an underscore are looked
// at, and the aliases are derived without the readers' cache, which holds
// only the names tools read (a caller's keys are unbounded).
func checkAliases(m map[string]any) error {
	for k, v := range m {
		if v == nil || strings.IndexByte(k, '_') < 0 {
			continue
		}
		camel := camelCase(k)
		if camel == k || snakeCase(camel) != k {
			continue
		}
		if cv, ok := m[camel]; ok && cv != nil {
			return inputError(fmt.Sprintf("parameters %q and %q are the same parameter: send only one of them", camel, k))
		}
	}
	return nil
}

// camelCase is the name whose SnakeCase is s, for s in OpenClaw's form
// (session_key -> sessionKey); checkAliases confirms it round-trips.
func camelCase(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	up := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' && i > 0:
			up = true
		case up && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			up = false
		default:
			b.WriteByte(c)
			up = false
		}
	}
	return b.String()
}

// jsonKind names the type of a decoded JSON value that is not an object.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

func invalidJSON(err error) error {
	detail := err.Error()
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		detail = fmt.Sprintf("%s (at byte %d)", syn.Error(), syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		detail = "unexpected end of input"
	}
	return inputError("invalid JSON: " + detail + "; send the tool parameters as one JSON object, e.g. " + paramsExample)
}

func (p Params) raw(name string) (any, bool) {
	if v, ok := p[name]; ok && v != nil {
		return v, true
	}
	if alias := SnakeCase(name); alias != name {
		if v, ok := p[alias]; ok && v != nil {
			return v, true
		}
	}
	return nil, false
}

// Present reports whether name (or its snake_case alias) was sent with a
// non-null value, blank strings included, for parameters where blank means
// something (session_status: model "" resets the override).
func (p Params) Present(name string) bool {
	_, ok := p.raw(name)
	return ok
}

// Raw is the parameter's value as decoded (camelCase, then snake_case);
// JSON null is absent.
func (p Params) Raw(name string) (any, bool) { return p.raw(name) }

// String reads a trimmed string; blank counts as absent, as in OpenClaw.
// Unlike OpenClaw, which silently ignores a non-string, it is an error here,
// because an ignored argument (a numeric sessionKey, say) would make the
// tool act on something the caller did not mean.
func (p Params) String(name string) (string, bool, error) {
	v, ok := p.raw(name)
	if !ok {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, inputError(name + " must be a string")
	}
	if s = trim(s); s == "" {
		return "", false, nil
	}
	return s, true, nil
}

// RequiredString is String with absence reported as "<name> required".
func (p Params) RequiredString(name string) (string, error) {
	s, ok, err := p.String(name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", inputError(name + " required")
	}
	return s, nil
}

// Bool reads a JSON boolean. OpenClaw types these parameters boolean and,
// unlike its integer readers, has no reader that parses a string: a quoted
// "false" is ignored there, or read as true where a value is tested for
// truth. Either way the caller's intent is lost, so a string (or a number)
// is refused here, as String refuses a non-string.
func (p Params) Bool(name string) (v, present bool, err error) {
	raw, ok := p.raw(name)
	if !ok {
		return false, false, nil
	}
	if b, isBool := raw.(bool); isBool {
		return b, true, nil
	}
	if _, isString := raw.(string); isString {
		return false, false, inputError(name + " must be a boolean: send true or false, not a string")
	}
	return false, false, inputError(name + " must be a boolean: send true or false")
}

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER: larger values
// cannot round-trip through an OpenClaw client, so they are refused.
const maxSafeInteger = 1<<53 - 1

// PositiveInt reads a strict integer ≥ 1, as OpenClaw's readers do.
func (p Params) PositiveInt(name string) (int, bool, error) {
	return p.integer(name, 1, name+" must be a positive integer")
}

// NonNegativeInt reads a strict integer ≥ 0, as OpenClaw's readers do.
func (p Params) NonNegativeInt(name string) (int, bool, error) {
	return p.integer(name, 0, name+" must be a non-negative integer")
}

// integer follows OpenClaw's strict integer readers
// (readPositiveIntegerParam and readNonNegativeIntegerParam), which parse a
// string holding a number as that number and throw "<name> must be a
// positive integer" for anything else. So it accepts what JavaScript's
// Number.isSafeInteger would on the parsed value: JSON numbers such as 10,
// 10.0 or 1e1, and strings holding a JSON number ("10"). It rejects
// fractions, out-of-range values, booleans, and strings that are not JSON
// numbers (hex, "NaN", "Infinity", "+1", "010"). A blank string is absent,
// as upstream's readers treat it.
func (p Params) integer(name string, min float64, msg string) (int, bool, error) {
	raw, ok := p.raw(name)
	if !ok {
		return 0, false, nil
	}
	var f float64
	switch v := raw.(type) {
	case json.Number:
		parsed, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, false, inputError(msg)
		}
		f = parsed
	case string:
		s := trim(v)
		if s == "" {
			return 0, false, nil
		}
		parsed, err := strconv.ParseFloat(s, 64)
		if err != nil || !isJSONNumber(s) {
			return 0, false, inputError(msg)
		}
		f = parsed
	case float64:
		f = v
	case float32:
		f = float64(v)
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case int32:
		f = float64(v)
	default:
		return 0, false, inputError(msg)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f < min || f > maxSafeInteger {
		return 0, false, inputError(msg)
	}
	return int(f), true, nil
}

var jsonNumberRe = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

func isJSONNumber(s string) bool { return jsonNumberRe.MatchString(s) }

// AgentID reads a parameter that names an agent (agentId): trimmed, blank
// is absent, otherwise it must pass ValidateAgentIDInput and comes back
// lower-cased. Every tool reads agent ids through it.
func (p Params) AgentID(name string) (string, bool, error) {
	s, ok, err := p.String(name)
	if err != nil || !ok {
		return "", false, err
	}
	id, err := ValidateAgentIDInput(name, s)
	if err != nil {
		return "", false, err
	}
	return id, true, nil
}

// StringList reads an array of strings, trimmed, with blank entries dropped.
// A single string is accepted as a one-element list, as upstream does. A list
// that ends up empty is absent, so an empty filter means "no filter".
// Non-string entries are an error rather than silently dropped, consistent
// with String.
func (p Params) StringList(name string) ([]string, bool, error) {
	raw, ok := p.raw(name)
	if !ok {
		return nil, false, nil
	}
	var items []any
	switch v := raw.(type) {
	case string:
		items = []any{v}
	case []any:
		items = v
	case []string:
		for _, s := range v {
			items = append(items, s)
		}
	default:
		return nil, false, inputError(name + " must be an array of strings")
	}
	var out []string
	for _, item := range items {
		s, isString := item.(string)
		if !isString {
			return nil, false, inputError(name + " must be an array of strings")
		}
		if s = trim(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, false, nil
	}
	return out, true, nil
}

var (
	snakeAcronymRe = regexp.MustCompile(`([A-Z]+)([A-Z][a-z])`)
	snakeWordRe    = regexp.MustCompile(`([a-z0-9])([A-Z])`)
)

// SnakeCase derives a parameter's snake_case alias the way OpenClaw does
// (sessionKey → session_key, HTTPServer → http_server), so both spellings
// reach the same reader.
func SnakeCase(name string) string {
	if v, ok := snakeCache.Load(name); ok {
		return v.(string)
	}
	s := snakeCase(name)
	snakeCache.Store(name, s)
	return s
}

// snakeCache holds the aliases of the parameter names tools read: a fixed
// set of literals, derived once instead of by two regexp passes per lookup.
var snakeCache sync.Map

func snakeCase(name string) string {
	s := snakeAcronymRe.ReplaceAllString(name, "${1}_${2}")
	s = snakeWordRe.ReplaceAllString(s, "${1}_${2}")
	return strings.ToLower(s)
}
