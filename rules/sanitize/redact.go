package sanitize

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Credential redaction (the built-in patterns and logging.redactPatterns).
// Patterns run one after another on the evolving text. For each match, the
// last non-empty capture group (or the whole match) is the token; a token
// shorter than 18 UTF-16 units becomes "***", a longer one keeps its first 6
// and last 4 units around "…". The token is replaced where the group
// matched, so a KEY= prefix stays. A match containing "PRIVATE KEY-----"
// keeps only its first and last non-empty lines.
//
// Two deliberate departures from the reference, both of which can leak the
// secret there: the token is replaced at its capture position (the reference
// replaces its first occurrence in the match, which may be inside the key
// name, e.g. "PASSWORD=PASS"), and the mask is inserted literally (the
// reference passes it to String.replace, where a "$&" inside the kept
// characters would re-insert the whole token).

const (
	redactMinLength = 18
	redactKeepStart = 6
	redactKeepEnd   = 4

	// Texts longer than redactChunkThreshold UTF-16 units are redacted in
	// redactChunkSize slices per pattern, as the reference does to bound regex
	// work; a secret straddling a slice boundary survives, as it does there.
	redactChunkThreshold = 32768
	redactChunkSize      = 16384
)

var (
	defaultRedactorOnce sync.Once
	defaultRedactor     *Redactor
)

// Redactor masks credentials. It is immutable and safe for concurrent use;
// a nil *Redactor behaves like DefaultRedactor().
type Redactor struct {
	logOff       bool
	logPatterns  []*redactPattern
	toolPatterns []*redactPattern
	fingerprint  string
}

// DefaultRedactor returns the redactor for a config without logging keys:
// log redaction on, no user patterns.
func DefaultRedactor() *Redactor {
	defaultRedactorOnce.Do(func() {
		defaultRedactor, _ = NewRedactor("", nil)
	})
	return defaultRedactor
}

// NewRedactor builds a redactor from logging.redactSensitive (mode: "off"
// disables log redaction; any other value, or "", leaves it on) and
// logging.redactPatterns (custom: plain strings compiled with flags "gi", or
// "/source/flags"). Blank entries are ignored. A pattern RE2 cannot express
// (back-references, lookaround) or one with nested repetition is an error
// naming the pattern; the reference drops such patterns silently, which would
// leave a configured secret unmasked without a word.
func NewRedactor(mode string, custom []string) (*Redactor, error) {
	var user []*redactPattern
	fp := []string{"off=" + strconv.FormatBool(mode == "off")}
	for _, raw := range custom {
		p, err := parseUserPattern(raw)
		if err != nil {
			return nil, err
		}
		if p != nil {
			user = append(user, p)
			fp = append(fp, strconv.Quote(raw))
		}
	}
	r := &Redactor{logOff: mode == "off", fingerprint: strings.Join(fp, ",")}
	// tool payloads take OpenClaw's tool-payload defaults, whose ENV-style
	// pattern (1) is case-sensitive: a lower-case `token=` a user pattern
	// already masked is not read as an ENV assignment and masked again
	d, td := defaults(), toolDefaults()
	r.logPatterns, r.toolPatterns = d, td
	if len(user) > 0 {
		r.logPatterns = user
		r.toolPatterns = append(append([]*redactPattern{}, user...), td...)
	}
	return r, nil
}

// CheckPattern reports why NewRedactor would refuse one
// logging.redactPatterns entry (unsafe, invalid, or beyond what sessionbus
// can run), or nil. Config loading uses it to drop such an entry with a
// warning, as OpenClaw ignores it, instead of refusing the whole config.
func CheckPattern(raw string) error {
	_, err := parseUserPattern(raw)
	return err
}

var slashPattern = regexp.MustCompile(`^/([^\n\r\x{2028}\x{2029}]+)/([gimsuy]*)$`)

func parseUserPattern(raw string) (*redactPattern, error) {
	if trimJS(raw) == "" {
		return nil, nil
	}
	body, flags := raw, "gi"
	if m := slashPattern.FindStringSubmatch(raw); m != nil {
		body, flags = m[1], m[2]
		for i := 0; i < len(flags); i++ {
			if strings.IndexByte(flags[i+1:], flags[i]) >= 0 {
				return nil, fmt.Errorf("logging.redactPatterns: pattern %q: duplicate flag %q", raw, flags[i])
			}
		}
	}
	body = trimJS(body)
	if body == "" {
		return nil, nil
	}
	if hasNestedRepetition(body) {
		return nil, fmt.Errorf("logging.redactPatterns: pattern %q is unsafe: nested repetition (a quantified group that already repeats) is rejected", raw)
	}
	re, err := compileJSRegex(body, flags)
	if err != nil {
		return nil, fmt.Errorf("logging.redactPatterns: pattern %q is invalid: %v", raw, err)
	}
	return &redactPattern{re: re}, nil
}

// Fingerprint names what the redactor does: two redactors with the same
// fingerprint mask every text the same way, so output cached under one is
// valid for the other. Each pattern is quoted, so no two pattern lists
// share a fingerprint.
func (r *Redactor) Fingerprint() string {
	if r == nil {
		r = DefaultRedactor()
	}
	return r.fingerprint
}

// ToolPayload redacts text that a tool returns to a model, as OpenClaw's
// tool-payload redaction does. It is always on, whatever
// logging.redactSensitive says, and applies the user patterns first, then
// the defaults with the ENV-style assignment matched in upper case only
// (toolDefaults). changed reports whether anything was masked.
func (r *Redactor) ToolPayload(s string) (out string, changed bool) {
	if r == nil {
		r = DefaultRedactor()
	}
	out = redactText(s, r.toolPatterns)
	return out, out != s
}

// ErrorText redacts a thrown error's message (it quotes the caller's
// arguments) as ToolPayload does: the user patterns, then the defaults with
// the ENV-style assignment matched in upper case only (see toolDefaults).
// Always on.
func (r *Redactor) ErrorText(s string) string {
	if r == nil {
		r = DefaultRedactor()
	}
	return redactText(s, r.toolPatterns)
}

// Log redacts text bound for logs: a no-op when logging.redactSensitive is
// "off"; otherwise the user patterns, or the defaults when there are none.
func (r *Redactor) Log(s string) string {
	if r == nil {
		r = DefaultRedactor()
	}
	if r.logOff {
		return s
	}
	return redactText(s, r.logPatterns)
}

// MayMask reports whether ToolPayload would find anything to mask in s,
// scanned whole (no chunking). A caller that redacts many small pieces
// (every string of a reply) asks it once about their concatenation and
// skips the pieces when it says no: a pattern matching inside one piece
// matches inside the concatenation too, given the pieces are separated
// by characters no pattern reads as part of a secret.
func (r *Redactor) MayMask(s string) bool {
	if r == nil {
		r = DefaultRedactor()
	}
	lower := asciiLower(s)
	for _, p := range r.toolPatterns {
		if p.needles != nil && !slices.ContainsFunc(p.needles, func(n string) bool { return strings.Contains(lower, n) }) {
			continue
		}
		if len(findMatches(s, lower, p)) > 0 {
			return true
		}
	}
	return false
}
