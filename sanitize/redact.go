package sanitize

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Credential redaction (the built-in patterns and logging.redactPatterns). Patterns run one after another on the
// evolving text. For each match, the last non-empty capture group (or the
// whole match) is the token; a token shorter than 18 UTF-16 units becomes
// "***", a longer one keeps its first 6 and last 4 units around "…". The
// token is replaced where the group matched, so a KEY= prefix stays. A match
// containing "PRIVATE KEY-----" keeps only its first and last non-empty lines.
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

// defaultPattern is a reference pattern with the lower-case literals one of
// which any match must contain; texts without them skip the regex entirely.
//
// Go's regexp only accelerates patterns with a literal prefix, and the case
// folding of "gi" patterns turns every prefix into classes, so most patterns
// would otherwise run the NFA over every byte. Where every match must start
// at a place that is cheap to find (a vendor prefix, the start of a word that
// ends in KEY/TOKEN/..., a digit run before ':'), starts lists those places
// and the pattern is tried there, anchored; the leading \b, if any, is
// checked by starts and dropped from the anchored form. The matches are the
// same as a full scan's (TestAnchoredMatchesEqualFullScan).
type defaultPattern struct {
	source  string
	needles []string
	starts  func(s, lower string) []int
}

// defaultPatterns lists DEFAULT_REDACT_PATTERNS (compiled with flags "gi"),
// then the [B] additions that the spec states completely.
//
// Patterns #1 and #3 use a back-reference, (["']?)VALUE\1, which RE2 cannot
// express. Both are rewritten as the three alternatives the back-reference
// allows, in the order a backtracking engine tries them: "VALUE", 'VALUE',
// then the unquoted VALUE. The value is still the last non-empty group.
//
// [B] additions included: URL query parameters, standalone assignments, and
// the AKID / LTAI / hf_ / r8_ prefixes, each limited to the key names the
// spec lists. Not included: the [B] payment-key extension of #1 and its
// switch to case-sensitive matching (the spec elides the key list), form
// bodies, structured auth headers, app-specific passwords and registered
// secret values.
var defaultPatterns = []defaultPattern{
	// 1. ENV-style assignments: FOO_API_KEY=..., TOKEN: ...
	{`\b[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)\b\s*[=:]\s*(?:"([^\s"'\\]+)"|'([^\s"'\\]+)'|([^\s"'\\]+))`,
		[]string{"key", "token", "secret", "passw"}, keywordWordStarts},
	// 2. JSON fields.
	{`"(?:apiKey|token|secret|password|passwd|accessToken|refreshToken)"\s*:\s*"([^"]+)"`,
		[]string{`key"`, `token"`, `secret"`, `passw`}, nil},
	// 3. CLI flags.
	{`--(?:api[-_]?key|hook[-_]?token|token|secret|password|passwd)\s+(?:"([^\s"']+)"|'([^\s"']+)'|([^\s"']+))`,
		[]string{"--"}, nil},
	// 4. Authorization header.
	{`Authorization\s*[:=]\s*Bearer\s+([A-Za-z0-9._\-+=]+)`, []string{"authorization"}, needleStarts("authorization", false)},
	// 5. Bare bearer tokens.
	{`\bBearer\s+([A-Za-z0-9._\-+=]{18,})\b`, []string{"bearer"}, needleStarts("bearer", true)},
	// 6. PEM private keys.
	{`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+?-----END [A-Z ]*PRIVATE KEY-----`, []string{"private key-----"}, nil},
	// 7-15. Vendor token prefixes.
	{`\b(sk-[A-Za-z0-9_-]{8,})\b`, []string{"sk-"}, needleStarts("sk-", true)},
	{`\b(ghp_[A-Za-z0-9]{20,})\b`, []string{"ghp_"}, needleStarts("ghp_", true)},
	{`\b(github_pat_[A-Za-z0-9_]{20,})\b`, []string{"github_pat_"}, needleStarts("github_pat_", true)},
	{`\b(xox[baprs]-[A-Za-z0-9-]{10,})\b`, []string{"xox"}, needleStarts("xox", true)},
	{`\b(xapp-[A-Za-z0-9-]{10,})\b`, []string{"xapp-"}, needleStarts("xapp-", true)},
	{`\b(gsk_[A-Za-z0-9_-]{10,})\b`, []string{"gsk_"}, needleStarts("gsk_", true)},
	{`\b(AIza[0-9A-Za-z\-_]{20,})\b`, []string{"aiza"}, needleStarts("aiza", true)},
	{`\b(pplx-[A-Za-z0-9_-]{10,})\b`, []string{"pplx-"}, needleStarts("pplx-", true)},
	{`\b(npm_[A-Za-z0-9]{10,})\b`, []string{"npm_"}, needleStarts("npm_", true)},
	// 16. Telegram token inside /bot<token>/ URLs. 17. Bare Telegram tokens.
	{`\bbot(\d{6,}:[A-Za-z0-9_-]{20,})\b`, []string{"bot"}, needleStarts("bot", true)},
	{`\b(\d{6,}:[A-Za-z0-9_-]{20,})\b`, []string{":"}, digitRunStarts},
	// [B] URL query parameters.
	{`[?&](?:access[-_]?token|auth[-_]?token|hook[-_]?token|refresh[-_]?token|api[-_]?key|client[-_]?secret|token|key|secret|password|pass|passwd|auth|signature)=([^&\s"'<>]+)`,
		[]string{"="}, queryStarts},
	// [B] Standalone assignments.
	{`(^|[\s,;])(?:access_token|refresh_token|api[-_]?key|token|secret|password|passwd)=([^\s&#]+)`,
		[]string{"="}, assignmentStarts},
	// [B] Cloud and model-hub key prefixes.
	{`\b(AKID[A-Za-z0-9]{10,})\b`, []string{"akid"}, needleStarts("akid", true)},
	{`\b(LTAI[A-Za-z0-9]{10,})\b`, []string{"ltai"}, needleStarts("ltai", true)},
	{`\b(hf_[A-Za-z0-9]{10,})\b`, []string{"hf_"}, needleStarts("hf_", true)},
	{`\b(r8_[A-Za-z0-9]{10,})\b`, []string{"r8_"}, needleStarts("r8_", true)},
}

// Candidate start finders. s and lower are the same text, lower ASCII
// lower-cased (same byte offsets). Results are ascending and unique.

func wordBoundaryAt(s string, p int) bool { return p == 0 || !isWordByte(s[p-1]) }

func occurrences(lower, needle string, f func(k int)) {
	for i := 0; ; {
		k := strings.Index(lower[i:], needle)
		if k < 0 {
			return
		}
		f(i + k)
		i += k + 1
	}
}

// needleStarts: matches start at the literal (after a word boundary when the
// pattern begins with \b).
func needleStarts(needle string, boundary bool) func(s, lower string) []int {
	return func(s, lower string) []int {
		var out []int
		occurrences(lower, needle, func(k int) {
			if !boundary || wordBoundaryAt(s, k) {
				out = append(out, k)
			}
		})
		return out
	}
}

// keywordWordStarts: #1 matches start where a word ([A-Za-z0-9_]+) begins
// that ends in one of its keywords, because \b[A-Z0-9_]*KEYWORD\b can only
// consume word characters.
func keywordWordStarts(s, lower string) []int {
	var out []int
	for _, kw := range [...]string{"key", "token", "secret", "password", "passwd"} {
		occurrences(lower, kw, func(k int) {
			if e := k + len(kw); e < len(s) && isWordByte(s[e]) {
				return
			}
			p := k
			for p > 0 && isWordByte(s[p-1]) {
				p--
			}
			out = append(out, p)
		})
	}
	return sortUnique(out)
}

// digitRunStarts: #17 matches start at a run of at least six digits that
// ends at ':' and follows a word boundary.
func digitRunStarts(s, lower string) []int {
	var out []int
	occurrences(lower, ":", func(k int) {
		p := k
		for p > 0 && s[p-1] >= '0' && s[p-1] <= '9' {
			p--
		}
		if k-p >= 6 && wordBoundaryAt(s, p) {
			out = append(out, p)
		}
	})
	return out
}

func queryStarts(s, lower string) []int {
	var out []int
	for i := 0; i < len(s); i++ {
		if s[i] == '?' || s[i] == '&' {
			out = append(out, i)
		}
	}
	return out
}

// assignmentStarts: the standalone pattern starts at the separator before a
// key name (or at 0, via ^, when the key starts the text).
func assignmentStarts(s, lower string) []int {
	var out []int
	for _, kw := range [...]string{"access_token=", "refresh_token=", "apikey=", "api-key=", "api_key=",
		"token=", "secret=", "password=", "passwd="} {
		occurrences(lower, kw, func(k int) {
			switch {
			case k == 0:
				out = append(out, 0)
			case s[k-1] == ',' || s[k-1] == ';':
				out = append(out, k-1)
			case isJSSpaceBefore(s, k):
				_, w := utf8.DecodeLastRuneInString(s[:k])
				out = append(out, k-w)
			}
		})
	}
	return sortUnique(out)
}

func sortUnique(xs []int) []int {
	if len(xs) < 2 {
		return xs
	}
	sort.Ints(xs)
	out := xs[:1]
	for _, x := range xs[1:] {
		if x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return out
}

type redactPattern struct {
	re       *jsRegex
	needles  []string // nil: always run
	starts   func(s, lower string) []int
	anchored *regexp.Regexp // the pattern anchored at a start, leading \b removed
}

var (
	compiledDefaultsOnce      sync.Once
	compiledDefaults          []*redactPattern
	compiledErrorDefaultsOnce sync.Once
	compiledErrorDefaults     []*redactPattern
	defaultRedactorOnce       sync.Once
	defaultRedactor           *Redactor
)

func defaults() []*redactPattern {
	compiledDefaultsOnce.Do(func() { compiledDefaults = compileDefaults("gi") })
	return compiledDefaults
}

// errorDefaults are the defaults for error messages: the same, except that
// the ENV-style assignment (#1) must be spelt in upper case, as ENV names
// are. Error texts quote arguments after their parameter's name
// ("Unknown sessionKey: agent:main:main", the reference's literal), which
// the case-insensitive #1 reads as a KEY: value assignment and masks.
func errorDefaults() []*redactPattern {
	compiledErrorDefaultsOnce.Do(func() { compiledErrorDefaults = compileDefaults("g") })
	return compiledErrorDefaults
}

// compileDefaults compiles defaultPatterns; firstFlags are the flags of
// the first (ENV assignment) pattern, every other pattern uses "gi".
func compileDefaults(firstFlags string) []*redactPattern {
	var out []*redactPattern
	for i, d := range defaultPatterns {
		flags := "gi"
		if i == 0 {
			flags = firstFlags
		}
		re, err := compileJSRegex(d.source, flags)
		if err != nil {
			panic(fmt.Sprintf("sanitize: default redaction pattern %q: %v", d.source, err))
		}
		p := &redactPattern{re: re, needles: d.needles, starts: d.starts}
		if d.starts != nil {
			a, err := compileJSRegex("^(?:"+strings.TrimPrefix(d.source, `\b`)+")", flags)
			if err != nil {
				panic(fmt.Sprintf("sanitize: default redaction pattern %q: %v", d.source, err))
			}
			p.anchored = a.re
		}
		out = append(out, p)
	}
	return out
}

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
	d := defaults()
	if len(user) == 0 {
		r.logPatterns, r.toolPatterns = d, d
		return r, nil
	}
	r.logPatterns = user
	r.toolPatterns = append(append([]*redactPattern{}, user...), d...)
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

// ToolPayload redacts text that a tool returns to a model. It is always on,
// whatever logging.redactSensitive says, and applies the user patterns first,
// then the defaults. changed reports whether anything was masked.
func (r *Redactor) ToolPayload(s string) (out string, changed bool) {
	if r == nil {
		r = DefaultRedactor()
	}
	out = redactText(s, r.toolPatterns)
	return out, out != s
}

// ErrorText redacts a thrown error's message (it quotes the caller's
// arguments): the user patterns, then the defaults with the ENV-style
// assignment matched in upper case only (see errorDefaults). Always on,
// like ToolPayload.
func (r *Redactor) ErrorText(s string) string {
	if r == nil {
		r = DefaultRedactor()
	}
	ps := errorDefaults()
	if n := len(r.toolPatterns) - len(defaults()); n > 0 {
		ps = append(append([]*redactPattern{}, r.toolPatterns[:n]...), ps...)
	}
	return redactText(s, ps)
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

// redactState is the evolving text with the derived forms the patterns
// need, recomputed only after a pattern changes the text.
type redactState struct {
	s      string
	lower  string
	bounds []int // chunk byte offsets, or nil when the text is one chunk
	fresh  bool
}

func (st *redactState) set(s, lower string) {
	st.s, st.lower, st.fresh = s, lower, false
}

func (st *redactState) derive() {
	if st.fresh {
		return
	}
	st.bounds = nil
	if len(st.s) > redactChunkThreshold && utf16Len(st.s) > redactChunkThreshold {
		st.bounds = utf16ChunkBounds(st.s, redactChunkSize)
	}
	st.fresh = true
}

func redactText(s string, patterns []*redactPattern) string {
	if s == "" {
		return s
	}
	var st redactState
	st.set(s, asciiLower(s))
	for _, p := range patterns {
		st.derive()
		if p.needles != nil {
			hit := false
			for _, n := range p.needles {
				if strings.Contains(st.lower, n) {
					hit = true
					break
				}
			}
			if !hit {
				continue
			}
		}
		if out, lower, changed := replaceBounded(&st, p); changed {
			st.set(out, lower)
		}
	}
	return st.s
}

// asciiLower lower-cases ASCII letters only, matching how the patterns fold
// and keeping byte offsets.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return s
}

// replaceBounded applies one pattern, chunk-wise above the threshold, and
// returns the new text with its lower-cased form.
func replaceBounded(st *redactState, p *redactPattern) (string, string, bool) {
	if st.bounds == nil {
		return replaceAll(st.s, st.lower, p)
	}
	var b, bl strings.Builder
	changed := false
	for i := 1; i < len(st.bounds); i++ {
		lo, hi := st.bounds[i-1], st.bounds[i]
		out, lower, c := replaceAll(st.s[lo:hi], st.lower[lo:hi], p)
		changed = changed || c
		b.WriteString(out)
		bl.WriteString(lower)
	}
	if !changed {
		return st.s, st.lower, false
	}
	return b.String(), bl.String(), true
}

// findMatches is FindAllStringSubmatchIndex, via the anchored candidates when
// the pattern has them. None of those patterns can match the empty string, so
// "next match at or after the previous end" is all FindAll does.
func findMatches(s, lower string, p *redactPattern) [][]int {
	if p.starts == nil {
		return p.re.re.FindAllStringSubmatchIndex(s, -1)
	}
	var out [][]int
	cursor := 0
	for _, st := range p.starts(s, lower) {
		if st < cursor {
			continue
		}
		m := p.anchored.FindStringSubmatchIndex(s[st:])
		if m == nil {
			continue
		}
		for k := range m {
			if m[k] >= 0 {
				m[k] += st
			}
		}
		out = append(out, m)
		cursor = m[1]
	}
	return out
}

// replaceAll is String.prototype.replace with a global regex and the
// redaction callback. Go skips an empty match that abuts the previous match
// where JavaScript would report it; only user patterns that match the empty
// string can tell the difference.
func replaceAll(s, lower string, p *redactPattern) (string, string, bool) {
	ms := findMatches(s, lower, p)
	if len(ms) == 0 {
		return s, lower, false
	}
	var b, bl strings.Builder
	b.Grow(len(s))
	bl.Grow(len(s))
	prev, changed := 0, false
	for _, m := range ms {
		if p.re.sticky && m[0] != prev {
			break
		}
		r := redactMatch(s, m)
		changed = changed || r != s[m[0]:m[1]]
		b.WriteString(s[prev:m[0]])
		b.WriteString(r)
		bl.WriteString(lower[prev:m[0]])
		bl.WriteString(asciiLower(r))
		prev = m[1]
	}
	if !changed {
		return s, lower, false
	}
	b.WriteString(s[prev:])
	bl.WriteString(lower[prev:])
	return b.String(), bl.String(), true
}

func redactMatch(s string, m []int) string {
	match := s[m[0]:m[1]]
	if strings.Contains(match, "PRIVATE KEY-----") {
		return redactPEMBlock(match)
	}
	for g := len(m)/2 - 1; g >= 1; g-- {
		ts, te := m[2*g], m[2*g+1]
		if ts >= 0 && te > ts {
			return s[m[0]:ts] + maskToken(s[ts:te]) + s[te:m[1]]
		}
	}
	return maskToken(match)
}

func maskToken(token string) string {
	if utf16Len(token) < redactMinLength {
		return "***"
	}
	return token[:utf16PrefixEnd(token, redactKeepStart)] + "…" + token[utf16SuffixStart(token, redactKeepEnd):]
}

// redactPEMBlock keeps the BEGIN and END lines: block.split(/\r?\n/) with
// empty lines dropped; fewer than two lines leaves nothing to show.
func redactPEMBlock(block string) string {
	parts := strings.Split(block, "\n")
	var lines []string
	for i, p := range parts {
		if i < len(parts)-1 {
			p = strings.TrimSuffix(p, "\r")
		}
		if p != "" {
			lines = append(lines, p)
		}
	}
	if len(lines) < 2 {
		return "***"
	}
	return lines[0] + "\n…redacted…\n" + lines[len(lines)-1]
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
