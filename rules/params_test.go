package rules

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustParams(t *testing.T, body string) Params {
	t.Helper()
	p, err := ParseParams([]byte(body))
	if err != nil {
		t.Fatalf("ParseParams(%s): %v", body, err)
	}
	return p
}

func wantInputError(t *testing.T, what string, err error, msg string) {
	t.Helper()
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Errorf("%s: error = %v, want *InputError %q", what, err, msg)
		return
	}
	if ie.Msg != msg {
		t.Errorf("%s: error = %q, want %q", what, ie.Msg, msg)
	}
}

func TestParseParams(t *testing.T) {
	for _, body := range []string{"", "  \n", "{}", " {} \n"} {
		p, err := ParseParams([]byte(body))
		if err != nil || len(p) != 0 || p == nil {
			t.Errorf("ParseParams(%q) = (%v, %v), want empty params", body, p, err)
		}
	}

	p := mustParams(t, `{"limit": 10, "sessionKey": "main"}`)
	if n, ok := p["limit"].(json.Number); !ok || n.String() != "10" {
		t.Errorf("numbers must decode as json.Number, got %T %v", p["limit"], p["limit"])
	}

	notObject := map[string]string{
		`null`:    "null",
		` null `:  "null",
		`[]`:      "an array",
		`[1,2]`:   "an array",
		`"hello"`: "a string",
		`42`:      "a number",
		`-1.5e3`:  "a number",
		`true`:    "a boolean",
	}
	for body, kind := range notObject {
		_, err := ParseParams([]byte(body))
		wantInputError(t, body, err, "request body must be a JSON object of tool parameters, not "+kind+
			`; send {} to call without parameters, or e.g. {"sessionKey":"agent:main:main"}`)
	}

	malformed := map[string]string{
		`{`:          "invalid JSON: unexpected end of input; send the tool parameters as one JSON object, e.g. {\"sessionKey\":\"agent:main:main\"}",
		`{"a": }`:    "invalid JSON: invalid character '}' looking for beginning of value (at byte 7); send the tool parameters as one JSON object, e.g. {\"sessionKey\":\"agent:main:main\"}",
		`{'a': 1}`:   "invalid JSON: invalid character '\\'' looking for beginning of object key string (at byte 2); send the tool parameters as one JSON object, e.g. {\"sessionKey\":\"agent:main:main\"}",
		`{"a":1} {}`: "invalid JSON: unexpected data after the parameters object; send exactly one JSON object, e.g. {\"sessionKey\":\"agent:main:main\"}",
		`{"a":1}}`:   "invalid JSON: unexpected data after the parameters object; send exactly one JSON object, e.g. {\"sessionKey\":\"agent:main:main\"}",
	}
	for body, msg := range malformed {
		_, err := ParseParams([]byte(body))
		wantInputError(t, body, err, msg)
	}

	// one parameter under both its names is refused, not silently read
	// as the camelCase one
	dup := map[string]string{
		`{"sessionKey":"a","session_key":"b"}`:            `parameters "sessionKey" and "session_key" are the same parameter: send only one of them`,
		`{"session_key":"b","sessionKey":"a"}`:            `parameters "sessionKey" and "session_key" are the same parameter: send only one of them`,
		`{"runTimeoutSeconds":1,"run_timeout_seconds":2}`: `parameters "runTimeoutSeconds" and "run_timeout_seconds" are the same parameter: send only one of them`,
	}
	for body, msg := range dup {
		_, err := ParseParams([]byte(body))
		wantInputError(t, body, err, msg)
	}
	// a null one is absent, and keys that are not each other's alias pass
	for _, body := range []string{`{"sessionKey":"a","session_key":null}`, `{"sessionKey":null,"session_key":"b"}`, `{"session_key":"b"}`, `{"a_b":1,"aB_c":2}`, `{"_x":1,"X":2}`} {
		if _, err := ParseParams([]byte(body)); err != nil {
			t.Errorf("ParseParams(%s): %v", body, err)
		}
	}
}

func TestParamsString(t *testing.T) {
	p := mustParams(t, `{
		"sessionKey": "  agent:main:main  ",
		"label": "",
		"blank": "   ",
		"message_text": "snake",
		"timeoutSeconds": 5,
		"agentId": null,
		"agent_id": "ops",
		"camel": "c", "camel_x": "unused"
	}`)
	tests := []struct {
		name, want string
		ok         bool
		err        string
	}{
		{"sessionKey", "agent:main:main", true, ""},
		{"label", "", false, ""},
		{"blank", "", false, ""},
		{"messageText", "snake", true, ""}, // snake_case alias
		{"missing", "", false, ""},
		{"agentId", "ops", true, ""}, // null camelCase falls through to the alias
		{"timeoutSeconds", "", false, "timeoutSeconds must be a string"},
	}
	for _, tt := range tests {
		got, ok, err := p.String(tt.name)
		if tt.err != "" {
			wantInputError(t, tt.name, err, tt.err)
			continue
		}
		if err != nil || got != tt.want || ok != tt.ok {
			t.Errorf("String(%q) = (%q, %v, %v), want (%q, %v, nil)", tt.name, got, ok, err, tt.want, tt.ok)
		}
	}

	// camelCase wins over snake_case when both are present (ParseParams
	// refuses such a body; a map built in code may still hold both).
	p = Params{"sessionKey": "camel", "session_key": "snake"}
	if got, _, _ := p.String("sessionKey"); got != "camel" {
		t.Errorf("camelCase must win, got %q", got)
	}
	// A blank camelCase value is still the value (absent), as upstream.
	p = Params{"sessionKey": " ", "session_key": "snake"}
	if _, ok, _ := p.String("sessionKey"); ok {
		t.Error("blank camelCase must not fall through to the alias")
	}
}

func TestParamsRequiredString(t *testing.T) {
	p := mustParams(t, `{"message": " hi ", "task": "  ", "sessionKey": 7}`)
	if got, err := p.RequiredString("message"); err != nil || got != "hi" {
		t.Errorf("RequiredString(message) = (%q, %v)", got, err)
	}
	_, err := p.RequiredString("task")
	wantInputError(t, "task", err, "task required")
	_, err = p.RequiredString("label")
	wantInputError(t, "label", err, "label required")
	_, err = p.RequiredString("sessionKey")
	wantInputError(t, "sessionKey", err, "sessionKey must be a string")
	_, err = Params{}.RequiredString("sessionKey")
	wantInputError(t, "empty", err, "sessionKey required")
	_, err = Params{}.RequiredString("message")
	wantInputError(t, "empty", err, "message required")
}

func TestParamsBool(t *testing.T) {
	p := mustParams(t, `{"a": true, "b": false, "c": "TRUE", "d": " false ", "e": "", "f": 1, "g": "yes", "include_tools": true, "h": null, "i": [true], "j": {}}`)
	tests := []struct {
		name  string
		v, ok bool
		err   string
	}{
		{"a", true, true, ""},
		{"b", false, true, ""},
		{"h", false, false, ""},
		{"missing", false, false, ""},
		{"includeTools", true, true, ""},
		// no string is read as a boolean, not even a blank one
		{"c", false, false, "c must be a boolean: send true or false, not a string"},
		{"d", false, false, "d must be a boolean: send true or false, not a string"},
		{"e", false, false, "e must be a boolean: send true or false, not a string"},
		{"g", false, false, "g must be a boolean: send true or false, not a string"},
		{"f", false, false, "f must be a boolean: send true or false"},
		{"i", false, false, "i must be a boolean: send true or false"},
		{"j", false, false, "j must be a boolean: send true or false"},
	}
	for _, tt := range tests {
		v, ok, err := p.Bool(tt.name)
		if tt.err != "" {
			wantInputError(t, tt.name, err, tt.err)
			continue
		}
		if err != nil || v != tt.v || ok != tt.ok {
			t.Errorf("Bool(%q) = (%v, %v, %v), want (%v, %v, nil)", tt.name, v, ok, err, tt.v, tt.ok)
		}
	}
}

func TestParamsIntegers(t *testing.T) {
	const pos, nonneg = "limit must be a positive integer", "limit must be a non-negative integer"
	tests := []struct {
		json     string // value of "limit"
		posV     int
		posOK    bool
		posErr   bool
		nonnegV  int
		nonnegOK bool
		nonErr   bool
	}{
		{`10`, 10, true, false, 10, true, false},
		{`1`, 1, true, false, 1, true, false},
		{`0`, 0, false, true, 0, true, false},
		{`-0`, 0, false, true, 0, true, false},
		{`-1`, 0, false, true, 0, false, true},
		{`10.0`, 10, true, false, 10, true, false}, // integral in JavaScript
		{`1e2`, 100, true, false, 100, true, false},
		{`10.5`, 0, false, true, 0, false, true},
		{`0.1`, 0, false, true, 0, false, true},
		{`9007199254740991`, 9007199254740991, true, false, 9007199254740991, true, false},
		{`9007199254740992`, 0, false, true, 0, false, true},
		{`1e400`, 0, false, true, 0, false, true},
		{`"10"`, 10, true, false, 10, true, false},
		{`" 7 "`, 7, true, false, 7, true, false},
		{`"0"`, 0, false, true, 0, true, false},
		{`"1e3"`, 1000, true, false, 1000, true, false},
		{`""`, 0, false, false, 0, false, false}, // blank is absent
		{`"  "`, 0, false, false, 0, false, false},
		{`null`, 0, false, false, 0, false, false},
		{`"abc"`, 0, false, true, 0, false, true},
		{`"NaN"`, 0, false, true, 0, false, true},
		{`"Infinity"`, 0, false, true, 0, false, true},
		{`"0x10"`, 0, false, true, 0, false, true},
		{`"+5"`, 0, false, true, 0, false, true},
		{`"010"`, 0, false, true, 0, false, true},
		{`"1.5"`, 0, false, true, 0, false, true},
		{`"1_000"`, 0, false, true, 0, false, true},
		{`true`, 0, false, true, 0, false, true},
		{`[1]`, 0, false, true, 0, false, true},
		{`{}`, 0, false, true, 0, false, true},
	}
	for _, tt := range tests {
		p := mustParams(t, `{"limit": `+tt.json+`}`)
		v, ok, err := p.PositiveInt("limit")
		if tt.posErr {
			wantInputError(t, "PositiveInt "+tt.json, err, pos)
		} else if err != nil || v != tt.posV || ok != tt.posOK {
			t.Errorf("PositiveInt(%s) = (%d, %v, %v), want (%d, %v, nil)", tt.json, v, ok, err, tt.posV, tt.posOK)
		}
		v, ok, err = p.NonNegativeInt("limit")
		if tt.nonErr {
			wantInputError(t, "NonNegativeInt "+tt.json, err, nonneg)
		} else if err != nil || v != tt.nonnegV || ok != tt.nonnegOK {
			t.Errorf("NonNegativeInt(%s) = (%d, %v, %v), want (%d, %v, nil)", tt.json, v, ok, err, tt.nonnegV, tt.nonnegOK)
		}
	}

	// Reference literals, and the snake_case alias.
	p := mustParams(t, `{"active_minutes": 0, "messageLimit": -1, "offset": 1.5}`)
	_, _, err := p.PositiveInt("activeMinutes")
	wantInputError(t, "activeMinutes", err, "activeMinutes must be a positive integer")
	_, _, err = p.NonNegativeInt("messageLimit")
	wantInputError(t, "messageLimit", err, "messageLimit must be a non-negative integer")
	_, _, err = p.NonNegativeInt("offset")
	wantInputError(t, "offset", err, "offset must be a non-negative integer")

	// Maps built in code (no json.Number).
	p = Params{"a": 3, "b": float64(4), "c": int64(5), "d": 2.5}
	for name, want := range map[string]int{"a": 3, "b": 4, "c": 5} {
		if v, ok, err := p.PositiveInt(name); err != nil || !ok || v != want {
			t.Errorf("PositiveInt(%s) = (%d, %v, %v), want %d", name, v, ok, err, want)
		}
	}
	_, _, err = p.PositiveInt("d")
	wantInputError(t, "d", err, "d must be a positive integer")
}

func TestParamsAgentID(t *testing.T) {
	p := mustParams(t, `{"agentId": " Ops ", "blank": "  ", "agent_x": "lab", "num": 5, "wild": ">", "star": "ops*", "dot": "ops.prod",
		"space": "my agent", "lead": "-ops", "under": "_ops", "uni": "ünï", "long": "`+strings.Repeat("a", 65)+`", "max": "`+strings.Repeat("a", 64)+`"}`)
	const hint = `; an agent id is 1 to 64 letters, digits, "_" or "-", starting with a letter or digit, as in agents.list (e.g. "main")`
	tests := []struct {
		name, want string
		ok         bool
		err        string
	}{
		{"agentId", "ops", true, ""}, // trimmed and lower-cased, the form config stores ids in
		{"agentX", "lab", true, ""},  // snake_case alias
		{"max", strings.Repeat("a", 64), true, ""},
		{"blank", "", false, ""},
		{"missing", "", false, ""},
		{"num", "", false, "num must be a string"},
		{"wild", "", false, `wild ">" is not a valid agent id: it contains ">", a NATS wildcard` + hint},
		{"star", "", false, `star "ops*" is not a valid agent id: it contains "*", a NATS wildcard` + hint},
		{"dot", "", false, `dot "ops.prod" is not a valid agent id: it contains "."` + hint},
		{"space", "", false, `space "my agent" is not a valid agent id: it contains " "` + hint},
		{"lead", "", false, `lead "-ops" is not a valid agent id: it starts with "-"` + hint},
		{"under", "", false, `under "_ops" is not a valid agent id: it starts with "_"` + hint},
		{"uni", "", false, `uni "ünï" is not a valid agent id: it contains "ü" (U+00FC)` + hint},
		{"long", "", false, "long must be at most 64 characters (got 65)"},
	}
	for _, tt := range tests {
		got, ok, err := p.AgentID(tt.name)
		if tt.err != "" {
			wantInputError(t, tt.name, err, tt.err)
			continue
		}
		if err != nil || got != tt.want || ok != tt.ok {
			t.Errorf("AgentID(%q) = (%q, %v, %v), want (%q, %v, nil)", tt.name, got, ok, err, tt.want, tt.ok)
		}
	}
}

func TestParamsStringList(t *testing.T) {
	p := mustParams(t, `{
		"kinds": [" main ", "", "GROUP"],
		"single": " cron ",
		"empty": [],
		"blanks": ["", "  "],
		"mixed": ["a", 1],
		"num": 5,
		"obj": {"a": "b"},
		"agent_ids": ["x"]
	}`)
	tests := []struct {
		name string
		want []string
		ok   bool
		err  string
	}{
		{"kinds", []string{"main", "GROUP"}, true, ""},
		{"single", []string{"cron"}, true, ""},
		{"empty", nil, false, ""},
		{"blanks", nil, false, ""},
		{"missing", nil, false, ""},
		{"agentIds", []string{"x"}, true, ""},
		{"mixed", nil, false, "mixed must be an array of strings"},
		{"num", nil, false, "num must be an array of strings"},
		{"obj", nil, false, "obj must be an array of strings"},
	}
	for _, tt := range tests {
		got, ok, err := p.StringList(tt.name)
		if tt.err != "" {
			wantInputError(t, tt.name, err, tt.err)
			continue
		}
		if err != nil || ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("StringList(%q) = (%q, %v, %v), want (%q, %v, nil)", tt.name, got, ok, err, tt.want, tt.ok)
		}
	}
}

func TestSnakeCase(t *testing.T) {
	tests := map[string]string{
		"sessionKey":        "session_key",
		"activeMinutes":     "active_minutes",
		"timeoutSeconds":    "timeout_seconds",
		"messageLimit":      "message_limit",
		"includeTools":      "include_tools",
		"agentId":           "agent_id",
		"runTimeoutSeconds": "run_timeout_seconds",
		"message":           "message",
		"HTTPServer":        "http_server",
		"parseJSONBody":     "parse_json_body",
		"v2Key":             "v2_key",
		"already_snake":     "already_snake",
	}
	for range 2 { // the second pass answers from the cache
		for in, want := range tests {
			if got := SnakeCase(in); got != want {
				t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
			}
		}
	}
}

func TestInputErrorIsAnError(t *testing.T) {
	var err error = &InputError{Msg: "message required"}
	if err.Error() != "message required" {
		t.Errorf("Error() = %q", err.Error())
	}
}
