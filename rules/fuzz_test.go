package rules

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// paramReaders is every reader a tool applies to its parameters, with the
// names the tools read (handlers/*.go): decoding any body through them must
// give values or an *InputError, never a panic or another error.
var paramReaders = map[string][]string{
	"String":         {"action", "agentId", "cwd", "group", "idempotencyKey", "label", "message", "model", "relationship", "resumeSessionId", "runtime", "search", "sessionKey", "thinking", "thinkingLevel"},
	"RequiredString": {"channel", "from", "message", "sessionKey", "target", "task", "text"},
	"Bool":           {"activeOnly", "excludeSubagents", "includeDerivedTitles", "includeLastMessage", "includeTools", "lightContext", "pinned", "thread", "wait", "watch"},
	"NonNegativeInt": {"changesSince", "messageLimit", "offset", "timeoutSeconds"},
	"PositiveInt":    {"activeMinutes", "limit"},
	"AgentID":        {"agentId"},
	"StringList":     {"kinds"},
	"Present":        {"model", "thinkingLevel", "attachAs", "attachments"},
}

func isInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie) && ie.Msg != ""
}

// FuzzParams is the request envelope's body and every tool's parameter
// decoding: ParseParams, then every reader on every parameter name.
func FuzzParams(f *testing.F) {
	for _, s := range []string{
		"", " ", "{}", "null", "[]", `"x"`, "1", "{} {}", `{"sessionKey":"agent:main:main","message":"hi"}`,
		`{"session_key":"main","limit":"5"}`, `{"limit":1e400}`, `{"limit":-0}`, `{"limit":9223372036854775808}`,
		`{"limit":1.5}`, `{"offset":"00012"}`, `{"kinds":["main",1]}`, `{"kinds":"main"}`, `{"agentId":"../etc"}`,
		`{"agentId":"A\u0000"}`, `{"wait":"true"}`, `{"a":1,"a":2}`, `{"message":"\ud800"}`, "{\"message\":\"\xff\"}",
		`{"sessionKey":null,"session_key":"x"}`, `[[[[[[[[[[`, `{"attachments":[{"mimeType":"text/plain"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParseParams(body)
		if err == nil {
			err = p.RefuseNUL()
		}
		if err != nil {
			if !isInputError(err) {
				t.Fatalf("ParseParams(%q): %T %v, want an *InputError", body, err, err)
			}
			return
		}
		for reader, names := range paramReaders {
			for _, name := range names {
				var err error
				var got string
				switch reader {
				case "String":
					var present bool
					got, present, err = p.String(name)
					if err == nil && present && got == "" {
						t.Fatalf("String(%s) present but blank from %q", name, body)
					}
				case "RequiredString":
					got, err = p.RequiredString(name)
					if err == nil && got == "" {
						t.Fatalf("RequiredString(%s) gave a blank value from %q", name, body)
					}
				case "Bool":
					_, _, err = p.Bool(name)
				case "NonNegativeInt":
					var n int
					n, _, err = p.NonNegativeInt(name)
					if err == nil && n < 0 {
						t.Fatalf("%s(%s) = %d from %q", reader, name, n, body)
					}
				case "PositiveInt":
					var n int
					n, present, e := p.PositiveInt(name)
					err = e
					if err == nil && present && n < 1 {
						t.Fatalf("%s(%s) = %d from %q", reader, name, n, body)
					}
				case "AgentID":
					got, _, err = p.AgentID(name)
					if err == nil && got != "" && !ValidAgentID(got) {
						t.Fatalf("AgentID accepted %q from %q", got, body)
					}
				case "StringList":
					_, _, err = p.StringList(name)
				case "Present":
					p.Present(name)
				}
				if err != nil && !isInputError(err) {
					t.Fatalf("%s(%s) on %q: %T %v, want an *InputError", reader, name, body, err, err)
				}
			}
		}
	})
}

// parseAgentSessionKeyGeneral is ParseAgentSessionKey without its fast
// path for canonical keys.
func parseAgentSessionKeyGeneral(k string) (agentID, rest string, ok bool) {
	parts := nonEmptySegments(strings.ToLower(trim(k)))
	if len(parts) < 3 || parts[0] != "agent" {
		return "", "", false
	}
	return parts[1], strings.Join(parts[2:], ":"), true
}

// FuzzSessionKeys is the key parsing every tool applies to a sessionKey
// or agent id it is given: no panic, and what they return is consistent.
func FuzzSessionKeys(f *testing.F) {
	for _, s := range []string{
		"agent:main:main", "main", "agent:MAIN:subagent:x:subagent:y", "agent::", "agent:../x:main", "cron:job:run:1",
		"agent:main:telegram:group:1:thread:5", "a\x00b", "\xff", strings.Repeat("agent:", 50), "agent:main:acp:x", "node-1",
		"agent:main", "agent:main:", ":agent:main:x", "agent:main::x", " agent:main:x", "Agent:main:x", "agent:mäin:x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		id, rest, ok := ParseAgentSessionKey(k)
		if ok && (id == "" || rest == "") {
			t.Fatalf("ParseAgentSessionKey(%q) = %q, %q, ok", k, id, rest)
		}
		// the canonical key's fast paths give what the general rule gives
		if wid, wrest, wok := parseAgentSessionKeyGeneral(k); id != wid || rest != wrest || ok != wok {
			t.Fatalf("ParseAgentSessionKey(%q) = %q, %q, %v; the general rule %q, %q, %v", k, id, rest, ok, wid, wrest, wok)
		}
		if got, want := lowerTrim(k), strings.ToLower(trim(k)); got != want {
			t.Fatalf("lowerTrim(%q) = %q, want %q", k, got, want)
		}
		ClassifyKeyShape(k)
		if id := AgentIDFromKey(k); id == "" || !utf8.ValidString(id) && utf8.ValidString(k) {
			t.Fatalf("AgentIDFromKey(%q) = %q", k, id)
		}
		// depth counts ":subagent:" anywhere (the reference's fallback),
		// while IsSubagentKey wants it first: they need not agree
		if d := SubagentDepthFromKey(k); d < 0 || d > len(k)/len(":subagent:") {
			t.Fatalf("SubagentDepthFromKey(%q) = %d", k, d)
		}
		IsCronRunKey(k)
		IsCronKey(k)
		IsAcpKey(k)
		if base, id, ok := ParseThreadSuffix(k); ok && (id == "" || len(base) >= len(k)) || !ok && base != k {
			t.Fatalf("ParseThreadSuffix(%q) = %q, %q, %v", k, base, id, ok)
		}
		if err := ValidateSessionKeyInput(k); err != nil && !isInputError(err) {
			t.Fatalf("ValidateSessionKeyInput(%q): %T %v", k, err, err)
		}
		if id, err := ValidateAgentIDInput("agentId", k); err == nil && !ValidAgentID(id) {
			t.Fatalf("ValidateAgentIDInput accepted %q as %q", k, id)
		} else if err != nil && !isInputError(err) {
			t.Fatalf("ValidateAgentIDInput(%q): %T %v", k, err, err)
		}
		if n := NormalizeAgentID(k); n != "" && !ValidAgentID(n) {
			t.Fatalf("NormalizeAgentID(%q) = %q is not a valid id", k, n)
		}
	})
}
