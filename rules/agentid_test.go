package rules

import (
	"strings"
	"testing"
)

func TestValidAgentID(t *testing.T) {
	tests := map[string]bool{
		"main":                  true,
		"Main":                  true, // case-insensitive test
		"  ops  ":               true, // on the trimmed value
		"a":                     true,
		"0agent":                true,
		"my_agent-2":            true,
		strings.Repeat("a", 64): true,
		strings.Repeat("a", 65): false,
		"":                      false,
		"-ops":                  false,
		"_ops":                  false,
		"my agent":              false,
		"ops.prod":              false,
		"ünï":                   false,
		"\u212Aelvin":           false, // the Kelvin sign is not ASCII k
	}
	for in, want := range tests {
		if got := ValidAgentID(in); got != want {
			t.Errorf("ValidAgentID(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestNormalizeAgentID(t *testing.T) {
	tests := map[string]string{
		"":                        "main",
		"   ":                     "main",
		"Ops":                     "ops",
		" Research ":              "research",
		"My Agent!!":              "my-agent",
		"--ops--":                 "ops",
		"a.b/c":                   "a-b-c",
		"!!!":                     "main",
		"_ops":                    "_ops", // upstream only strips dashes
		"Ünïcode":                 "n-code",
		strings.Repeat("ab ", 40): strings.Repeat("ab-", 21) + "a",
	}
	for in, want := range tests {
		if got := NormalizeAgentID(in); got != want {
			t.Errorf("NormalizeAgentID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidateAgentIDInput(t *testing.T) {
	for in, want := range map[string]string{"main": "main", " Work_2 ": "work_2", "A-b": "a-b"} {
		if got, err := ValidateAgentIDInput("agentId", in); err != nil || got != want {
			t.Errorf("ValidateAgentIDInput(%q) = (%q, %v), want %q", in, got, err, want)
		}
	}
	const hint = `; an agent id is 1 to 64 letters, digits, "_" or "-", starting with a letter or digit, as in agents.list (e.g. "main")`
	for in, want := range map[string]string{
		"":            `agentId "" is not a valid agent id: it is empty` + hint,
		"a\x00b":      `agentId "a\x00b" is not a valid agent id: it contains "\x00"` + hint,
		"a:b":         `agentId "a:b" is not a valid agent id: it contains ":"` + hint,
		"\u212Aelvin": "agentId \"\u212Aelvin\" is not a valid agent id: it contains \"\u212A\" (U+212A)" + hint,
	} {
		_, err := ValidateAgentIDInput("agentId", in)
		wantInputError(t, in, err, want)
	}
}
