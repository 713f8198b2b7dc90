package rules

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

var invalidAgentRunRe = regexp.MustCompile(`[^a-z0-9_-]+`)

const maxAgentIDLen = 64

// ValidAgentID is the strict check sessions_spawn applies to explicit ids: it
// rejects rather than repairs. It tests ^[a-z0-9][a-z0-9_-]{0,63}$
// case-insensitively on the trimmed value, folding ASCII only: Go's (?i)
// would also fold the Kelvin sign to "k", JavaScript's /i does not.
func ValidAgentID(id string) bool {
	t := trim(id)
	if len(t) == 0 || len(t) > maxAgentIDLen {
		return false
	}
	for i, r := range t {
		if !agentIDChar(i, r) {
			return false
		}
	}
	return true
}

// agentIDChar reports whether r may stand at byte offset i of an agent id:
// an ASCII letter or digit anywhere, "_" or "-" after the first character.
func agentIDChar(i int, r rune) bool {
	alnum := ('a' <= r|0x20 && r|0x20 <= 'z') || ('0' <= r && r <= '9') // r|0x20 lands in a–z only for ASCII letters
	return alnum || (i > 0 && (r == '_' || r == '-'))
}

// ValidateAgentIDInput checks an agent id a caller passed as the parameter
// name and returns it lower-cased, the form config stores ids in. It is the
// one check for every tool parameter that names an agent (Params.AgentID).
// An invalid id is refused, never repaired: NormalizeAgentID would turn ">"
// into the default agent and "ops.prod" into "ops-prod", so a call would
// silently act on an agent the caller did not name. Errors are *InputError
// and say which character is wrong and what an agent id looks like.
func ValidateAgentIDInput(name, id string) (string, error) {
	t := trim(id)
	if n := utf8.RuneCountInString(t); n > maxAgentIDLen {
		return "", inputError(fmt.Sprintf("%s must be at most %d characters (got %d)", name, maxAgentIDLen, n))
	}
	if ValidAgentID(t) {
		return strings.ToLower(t), nil
	}
	return "", inputError(fmt.Sprintf("%s %s is not a valid agent id: %s; %s", name, echoKey(t), agentIDProblem(t), agentIDHint))
}

const agentIDHint = `an agent id is 1 to 64 letters, digits, "_" or "-", starting with a letter or digit, as in agents.list (e.g. "main")`

// agentIDProblem names what makes t invalid, for a t ValidAgentID refused.
func agentIDProblem(t string) string {
	if t == "" {
		return "it is empty"
	}
	for i, r := range t {
		if agentIDChar(i, r) {
			continue
		}
		q := strconv.Quote(string(r))
		if r >= utf8.RuneSelf {
			q += fmt.Sprintf(" (%U)", r) // look-alikes such as the Kelvin sign need their code point
		}
		switch {
		case r == '*' || r == '>':
			return "it contains " + q + ", a NATS wildcard"
		case r == '_' || r == '-':
			return "it starts with " + q
		}
		return "it contains " + q
	}
	return "it is not an agent id"
}

// NormalizeAgentID repairs an id the way OpenClaw does everywhere except
// sessions_spawn, so ids typed loosely in config or parameters still name the
// same agent. It is faithful to upstream, including its quirk that a leading
// "_" survives (only dashes are stripped), so the result is not always
// ValidAgentID.
func NormalizeAgentID(id string) string {
	t := trim(id)
	if t == "" {
		return DefaultAgentID
	}
	if ValidAgentID(t) {
		return strings.ToLower(t)
	}
	n := invalidAgentRunRe.ReplaceAllString(strings.ToLower(t), "-")
	n = strings.Trim(n, "-")
	if len(n) > maxAgentIDLen {
		n = n[:maxAgentIDLen] // ASCII only after the replacement, so a byte cut is a char cut.
	}
	if n == "" {
		return DefaultAgentID
	}
	return n
}
