package rules

import "testing"

func TestParseAgentSessionKey(t *testing.T) {
	tests := []struct {
		in          string
		agent, rest string
		ok          bool
	}{
		{"AGENT:Main:Hook:Webhook:42", "main", "hook:webhook:42", true},
		{"agent:main:main", "main", "main", true},
		{"  agent:ops:subagent:abc  ", "ops", "subagent:abc", true},
		{"agent:main::slack::channel:c1", "main", "slack:channel:c1", true}, // empty segments dropped
		{"agent::broken", "", "", false},
		{"agent:main", "", "", false},
		{"agent:main:", "", "", false},
		{"main", "", "", false},
		{"cron:nightly", "", "", false},
		{"", "", "", false},
		{"agents:main:main", "", "", false},
	}
	for _, tt := range tests {
		agent, rest, ok := ParseAgentSessionKey(tt.in)
		if agent != tt.agent || rest != tt.rest || ok != tt.ok {
			t.Errorf("ParseAgentSessionKey(%q) = (%q, %q, %v), want (%q, %q, %v)", tt.in, agent, rest, ok, tt.agent, tt.rest, tt.ok)
		}
	}
}

func TestClassifyKeyShape(t *testing.T) {
	tests := map[string]string{
		"":                ShapeMissing,
		"   ":             ShapeMissing,
		"agent:main:main": ShapeAgent,
		"Agent:X:y":       ShapeAgent,
		"agent::broken":   ShapeMalformedAgent,
		"AGENT:main":      ShapeMalformedAgent,
		"agent:":          ShapeMalformedAgent,
		"main":            ShapeLegacyOrAlias,
		"current":         ShapeLegacyOrAlias,
		"discord:group:1": ShapeLegacyOrAlias,
		"agentx:main:m":   ShapeLegacyOrAlias,
	}
	for in, want := range tests {
		if got := ClassifyKeyShape(in); got != want {
			t.Errorf("ClassifyKeyShape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAgentIDFromKey(t *testing.T) {
	tests := map[string]string{
		"agent:ops:main":           "ops",
		"AGENT:Research:slack:x:y": "research",
		"main":                     "main",
		"cron:nightly":             "main",
		"agent::broken":            "main",
		"":                         "main",
		"agent:my agent:main":      "my-agent", // normalized like upstream
		"agent:main:subagent:abc":  "main",
		"agent:Ops:x":              "ops", // the same agent as agent:ops:x
		"global":                   "main",
		"current":                  "main",
		"discord:group:1":          "main",
	}
	for in, want := range tests {
		if got := AgentIDFromKey(in); got != want {
			t.Errorf("AgentIDFromKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKeyPredicates(t *testing.T) {
	tests := []struct {
		key                          string
		cronRun, cron, subagent, acp bool
	}{
		{"agent:main:cron:nightly", false, true, false, false},
		{"agent:main:cron:nightly:run:r1", true, true, false, false},
		{"AGENT:MAIN:CRON:N:RUN:R1", true, true, false, false},
		{"agent:main:cron:nightly:run:r1:extra", false, true, false, false},
		{"agent:main:cron:nightly:run:", false, true, false, false},
		{"cron:nightly", false, false, false, false}, // bare cron key is not a cron key
		{"cron:nightly:run:r1", false, false, false, false},
		{"agent:main:subagent:abc", false, false, true, false},
		{"subagent:abc", false, false, true, false},
		{"Subagent:abc", false, false, true, false},
		{"agent:main:acp:x", false, false, false, true},
		{"acp:x", false, false, false, true},
		{"ACP:x", false, false, false, true},
		{"agent:main:main", false, false, false, false},
		{"", false, false, false, false},
	}
	for _, tt := range tests {
		if got := IsCronRunKey(tt.key); got != tt.cronRun {
			t.Errorf("IsCronRunKey(%q) = %v", tt.key, got)
		}
		if got := IsCronKey(tt.key); got != tt.cron {
			t.Errorf("IsCronKey(%q) = %v", tt.key, got)
		}
		if got := IsSubagentKey(tt.key); got != tt.subagent {
			t.Errorf("IsSubagentKey(%q) = %v", tt.key, got)
		}
		if got := IsAcpKey(tt.key); got != tt.acp {
			t.Errorf("IsAcpKey(%q) = %v", tt.key, got)
		}
	}
}

func TestSubagentDepthFromKey(t *testing.T) {
	tests := map[string]int{
		"agent:main:main":                  0,
		"agent:main:subagent:a":            1,
		"agent:main:subagent:a:subagent:b": 2,
		"AGENT:MAIN:SUBAGENT:A:SUBAGENT:B": 2,
		"subagent:a":                       0, // needs a leading ":"
		"":                                 0,
	}
	for in, want := range tests {
		if got := SubagentDepthFromKey(in); got != want {
			t.Errorf("SubagentDepthFromKey(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestParseThreadSuffix(t *testing.T) {
	tests := []struct {
		in, base, thread string
		ok               bool
	}{
		{"agent:main:slack:channel:C1:thread:1700.1", "agent:main:slack:channel:C1", "1700.1", true},
		{"agent:main:slack:channel:C1:THREAD:Abc", "agent:main:slack:channel:C1", "Abc", true},
		{"a:thread:1:thread:2", "a:thread:1", "2", true}, // last marker
		{"a:thread:  x  ", "a", "x", true},
		{"a:thread:", "a:thread:", "", false},
		{"a:thread:   ", "a:thread:   ", "", false},
		{"agent:main:telegram:group:-100:topic:7", "agent:main:telegram:group:-100:topic:7", "", false},
		{"agent:main:main", "agent:main:main", "", false},
		{"", "", "", false},
		{"İİ:thread:x", "İİ", "x", true}, // non-ASCII before the marker keeps byte offsets right
	}
	for _, tt := range tests {
		base, thread, ok := ParseThreadSuffix(tt.in)
		if base != tt.base || thread != tt.thread || ok != tt.ok {
			t.Errorf("ParseThreadSuffix(%q) = (%q, %q, %v), want (%q, %q, %v)", tt.in, base, thread, ok, tt.base, tt.thread, tt.ok)
		}
	}
}
