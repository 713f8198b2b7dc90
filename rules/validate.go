package rules

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxSessionKeyBytes bounds caller-supplied keys. Keys become NATS subject
// tokens and KV keys (escaped, so up to 3 bytes per input byte); 256 leaves
// room under the server's limits while exceeding every key OpenClaw builds.
const MaxSessionKeyBytes = 256

const (
	echoedKeyMaxChars = 80
	sessionKeyHint    = "session keys are colon-separated tokens like agent:main:main"
)

// ValidateSessionKeyInput refuses, at the edge, keys that could not be stored
// or addressed safely. Every other character OpenClaw puts in a key is
// accepted: peer and group ids carry "/" (Google Chat's spaces/AAAA, Signal's
// base64 group ids), "+", "=", "@", "!" and more, and bus.EncodeKey escapes
// whatever is not a subject character (a "*" or ">" becomes =2A, =3E, never
// a wildcard). Refused are whitespace, control and format characters (they
// corrupt logs and make distinct keys look alike), a "." or ".." path
// segment, an empty segment where OpenClaw has none, and more than
// MaxSessionKeyBytes. It does not trim: callers pass what they will use
// (Params.String already trims). Errors are *InputError and say what is
// wrong and what a valid key looks like.
func ValidateSessionKeyInput(k string) error {
	return validateKey(k, false)
}

// ValidateStoredKey is ValidateSessionKeyInput for a key another store
// already holds (an OpenClaw state directory being imported): empty
// segments are kept, so a row OpenClaw itself treats as malformed
// (agent::orphan) imports with the rest, and sessions_list leaves it out as
// OpenClaw does (IsMalformedAgentKey). What could not be stored or shown
// safely is refused as at the edge.
func ValidateStoredKey(k string) error {
	return validateKey(k, true)
}

func validateKey(k string, emptySegments bool) error {
	if k == "" {
		return inputError("sessionKey is invalid: it is empty; " + sessionKeyHint)
	}
	bad := func(problem string) error {
		return inputError(fmt.Sprintf("sessionKey %s is invalid: %s; %s", echoKey(k), problem, sessionKeyHint))
	}
	if len(k) > MaxSessionKeyBytes {
		return inputError(fmt.Sprintf("sessionKey %s is invalid: it is %d bytes long; use a key of at most %d bytes",
			echoKey(k), len(k), MaxSessionKeyBytes))
	}
	if !utf8.ValidString(k) {
		return bad("it is not valid UTF-8")
	}
	for _, r := range k {
		switch {
		case unicode.IsSpace(r) || isJSSpace(r):
			return bad(fmt.Sprintf("it contains whitespace (%U)", r))
		// Format characters (zero-width space, BOM, bidi controls) are
		// rejected with control characters: they make distinct keys look
		// identical in logs and UIs.
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return bad(fmt.Sprintf("it contains a control character (%U)", r))
		}
	}
	// A doubled ":" inside a key is OpenClaw's: an IPv6 literal in a Matrix
	// room key (agent:main:matrix:channel:!room:[2001:db8::1]) has one, and
	// OpenClaw stores the key as is (its parser only skips the empty
	// segment). bus.EncodeKey escapes such a ":" (=3A), so the key still
	// has a subject and a KV key of its own. Refused are what is not a key
	// in OpenClaw either: a leading or trailing ":", and an agent key whose
	// agent id or rest is empty (agent::broken, "malformed_agent").
	if !emptySegments && (strings.HasPrefix(k, ":") || strings.HasSuffix(k, ":") ||
		(strings.Contains(k, "::") && ClassifyKeyShape(k) == ShapeMalformedAgent)) {
		return bad(`it has an empty segment (a leading, trailing or doubled ":")`)
	}
	// "." and ".." are refused between any separators, "/" and "\\"
	// included, so no key reads as a relative path where one is shown or
	// copied into a file name.
	for _, seg := range strings.FieldsFunc(k, func(r rune) bool { return r == ':' || r == '/' || r == '\\' }) {
		switch seg {
		case ".", "..":
			return bad("it has a " + strconv.Quote(seg) + " segment")
		}
	}
	return nil
}

// echoKey quotes (escaping anything unprintable) and shortens a rejected key
// so an attacker-sized key cannot bloat the error reply.
func echoKey(k string) string {
	if utf8.RuneCountInString(k) > echoedKeyMaxChars {
		cut := 0
		for i := 0; i < echoedKeyMaxChars; i++ {
			_, size := utf8.DecodeRuneInString(k[cut:])
			cut += size
		}
		k = k[:cut] + "…"
	}
	return strconv.Quote(k)
}
