package sanitize

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// defaultPattern is a built-in pattern with the lower-case literals one of
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

// defaultPatterns lists OpenClaw's DEFAULT_REDACT_PATTERNS (compiled with
// flags "gi"), then the additions of OpenClaw's newer redaction rules whose
// description states them completely.
//
// Patterns 1 and 3 use a back-reference, (["']?)VALUE\1, which RE2 cannot
// express. Both are rewritten as the three alternatives the back-reference
// allows, in the order a backtracking engine tries them: "VALUE", 'VALUE',
// then the unquoted VALUE. The value is still the last non-empty group.
//
// Additions included: URL query parameters, standalone assignments, and
// the AKID / LTAI / hf_ / r8_ prefixes, each limited to the key names the
// description lists. Not included: the newer rules' payment-key extension
// of pattern 1 and its switch to case-sensitive matching (the description
// leaves out the key list), form bodies, structured auth headers,
// app-specific passwords and registered secret values.
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
	// Additions: URL query parameters.
	{`[?&](?:access[-_]?token|auth[-_]?token|hook[-_]?token|refresh[-_]?token|api[-_]?key|client[-_]?secret|token|key|secret|password|pass|passwd|auth|signature)=([^&\s"'<>]+)`,
		[]string{"="}, queryStarts},
	// Additions: standalone assignments.
	{`(^|[\s,;])(?:access_token|refresh_token|api[-_]?key|token|secret|password|passwd)=([^\s&#]+)`,
		[]string{"="}, assignmentStarts},
	// Additions: cloud and model-hub key prefixes.
	{`\b(AKID[A-Za-z0-9]{10,})\b`, []string{"akid"}, needleStarts("akid", true)},
	{`\b(LTAI[A-Za-z0-9]{10,})\b`, []string{"ltai"}, needleStarts("ltai", true)},
	{`\b(hf_[A-Za-z0-9]{10,})\b`, []string{"hf_"}, needleStarts("hf_", true)},
	{`\b(r8_[A-Za-z0-9]{10,})\b`, []string{"r8_"}, needleStarts("r8_", true)},
}

// Candidate start finders. s and lower are the same text, lower ASCII
// lower-cased (same byte offsets). Results are ascending and unique.
//
// wordBoundaryAt reports whether a \b holds before s[p].
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

// keywordWordStarts: pattern 1's matches start where a word ([A-Za-z0-9_]+) begins
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

// digitRunStarts: pattern 17's matches start at a run of at least six digits that
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

// redactPattern is one compiled pattern, built in or from
// logging.redactPatterns.
type redactPattern struct {
	re       *jsRegex
	needles  []string // nil: always run
	starts   func(s, lower string) []int
	anchored *regexp.Regexp // the pattern anchored at a start, leading \b removed
}

var (
	compiledDefaultsOnce     sync.Once
	compiledDefaults         []*redactPattern
	compiledToolDefaultsOnce sync.Once
	compiledToolDefaults     []*redactPattern
)

func defaults() []*redactPattern {
	compiledDefaultsOnce.Do(func() { compiledDefaults = compileDefaults("gi") })
	return compiledDefaults
}

// toolDefaults are the defaults of tool payloads (and error messages):
// the same, except that the ENV-style assignment (pattern 1) must be spelt
// in upper case, as ENV names are, as in OpenClaw's tool-payload variant,
// which writes it /…/g. Error texts quote arguments after their
// parameter's name ("Unknown sessionKey: agent:main:main", the reference's
// literal), which the case-insensitive pattern 1 would read as a KEY: value
// assignment and mask.
func toolDefaults() []*redactPattern {
	compiledToolDefaultsOnce.Do(func() { compiledToolDefaults = compileDefaults("g") })
	return compiledToolDefaults
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
