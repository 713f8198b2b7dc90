package rules

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateSessionKeyInputAccepts(t *testing.T) {
	for _, k := range []string{
		"agent:main:main",
		"main",
		"current",
		"global",
		"AGENT:Main:Hook:Webhook:42",
		"agent:main:slack:channel:C123:thread:1700000000.1234",
		"agent:main:whatsapp:120363-1@g.us",
		"agent:main:telegram:group:-100123:topic:7",
		"0f8fad5b-d9cb-469f-a165-70867728950e",
		"agent:main:discord:group:ünïcödé",
		"a.b", // dots inside a segment are fine (the store escapes them)
		// OpenClaw keys with a doubled ":" inside: IPv6 literals in Matrix
		// room ids (the store escapes the empty segment's ":").
		"agent:main:matrix:channel:!room:[2001:db8::1]",
		"agent:main:matrix:channel:!abc:[::1]:thread:$ev",
		"matrix:channel:!room:[fe80::1]",
		"agent::main:main",
		strings.Repeat("a", MaxSessionKeyBytes),
		// every character OpenClaw allows in peer and group ids:
		// Google Chat spaces, Signal base64 group ids, WhatsApp JIDs,
		// phone numbers, Matrix rooms, IRC channels
		"agent:main:googlechat:group:spaces/AAAAx1b2c3",
		"agent:main:googlechat:group:spaces/AAAA:thread:spaces/AAAA/threads/xyz",
		"agent:main:signal:group:q1W2e3R4t5Y6+/u7I8o9P0aSdFgHjKlZxCvBnM=",
		"agent:main:whatsapp:group:120363-1@g.us",
		"agent:main:per-peer:direct:+15551234567",
		"agent:main:irc:channel:#ops*>",
		`agent:main:x:direct:a\b`,
		"agent:main/x",
	} {
		if err := ValidateSessionKeyInput(k); err != nil {
			t.Errorf("ValidateSessionKeyInput(%q) = %v, want nil", k, err)
		}
	}
}

func TestValidateSessionKeyInputRejects(t *testing.T) {
	const hint = "; session keys are colon-separated tokens like agent:main:main"
	long := strings.Repeat("k", 10*1024)
	tests := []struct {
		in, want string
	}{
		{"", "sessionKey is invalid: it is empty" + hint},
		{"../../etc", `sessionKey "../../etc" is invalid: it has a ".." segment` + hint},
		{"agent:main:spaces/../x", `sessionKey "agent:main:spaces/../x" is invalid: it has a ".." segment` + hint},
		{`agent:main:a\.\b`, `sessionKey "agent:main:a\\.\\b" is invalid: it has a "." segment` + hint},
		{"agent:main:..", `sessionKey "agent:main:.." is invalid: it has a ".." segment` + hint},
		{".:agent", `sessionKey ".:agent" is invalid: it has a "." segment` + hint},
		{"agent::broken", `sessionKey "agent::broken" is invalid: it has an empty segment (a leading, trailing or doubled ":")` + hint},
		{"agent:main:", `sessionKey "agent:main:" is invalid: it has an empty segment (a leading, trailing or doubled ":")` + hint},
		{":main", `sessionKey ":main" is invalid: it has an empty segment (a leading, trailing or doubled ":")` + hint},
		{"agent:main main", `sessionKey "agent:main main" is invalid: it contains whitespace (U+0020)` + hint},
		{" agent:main:main", `sessionKey " agent:main:main" is invalid: it contains whitespace (U+0020)` + hint},
		{"agent:main:main\n", `sessionKey "agent:main:main\n" is invalid: it contains whitespace (U+000A)` + hint},
		{"agent:\x00main", `sessionKey "agent:\x00main" is invalid: it contains a control character (U+0000)` + hint},
		{"agent:main:\u200bx", `sessionKey "agent:main:\u200bx" is invalid: it contains a control character (U+200B)` + hint},
		{"agent:main:\ufeffx", `sessionKey "agent:main:\ufeffx" is invalid: it contains whitespace (U+FEFF)` + hint},
		{"agent:\xffmain", `sessionKey "agent:\xffmain" is invalid: it is not valid UTF-8` + hint},
		{long, `sessionKey "` + strings.Repeat("k", 80) + `…" is invalid: it is 10240 bytes long; use a key of at most 256 bytes`},
		{strings.Repeat("é", 200), `sessionKey "` + strings.Repeat("é", 80) + `…" is invalid: it is 400 bytes long; use a key of at most 256 bytes`},
	}
	for _, tt := range tests {
		err := ValidateSessionKeyInput(tt.in)
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("ValidateSessionKeyInput(%q) = %v, want *InputError", tt.in, err)
			continue
		}
		if ie.Msg != tt.want {
			t.Errorf("ValidateSessionKeyInput(%q)\n got %s\nwant %s", tt.in, ie.Msg, tt.want)
		}
	}
}

// A key another store holds keeps its empty segments (OpenClaw's malformed
// rows import), and the malformed ones are the keys sessions_list drops.
func TestValidateStoredKeyAndMalformedAgentKeys(t *testing.T) {
	for _, k := range []string{"agent::orphan", "agent::main:main", "agent:main::x", "agent:main:googlechat:group:spaces/AAAA"} {
		if err := ValidateStoredKey(k); err != nil {
			t.Errorf("ValidateStoredKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range []string{"agent:main:a b", "agent:main:..", strings.Repeat("k", MaxSessionKeyBytes+1)} {
		if err := ValidateStoredKey(k); err == nil {
			t.Errorf("ValidateStoredKey(%q) = nil, want an error", k)
		}
	}
	for k, want := range map[string]bool{
		"agent::orphan": true, "agent::main:main": true, "AGENT: :x": true, "agent:main:": true, "agent:main::x": true, "agent:main": true,
		"agent:main:main": false, "agent:main:signal:group:AbC=": false, "main": false, "global": false, "agentx:y:z": false,
	} {
		if got := IsMalformedAgentKey(k); got != want {
			t.Errorf("IsMalformedAgentKey(%q) = %v, want %v", k, got, want)
		}
	}
}
