package sanitize

import (
	"fmt"
	"strings"
	"testing"
)

type redactCase struct {
	name, in, want string
}

func runRedact(t *testing.T, r *Redactor, cases []redactCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := r.ToolPayload(tc.in)
			if got != tc.want {
				t.Fatalf("ToolPayload(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if changed != (tc.in != tc.want) {
				t.Fatalf("changed = %v for %q", changed, tc.in)
			}
		})
	}
}

const alpha26 = "abcdefghijklmnopqrstuvwxyz"

// One positive and one negative case per default pattern, in table order.
func TestDefaultPatterns(t *testing.T) {
	runRedact(t, DefaultRedactor(), []redactCase{
		// 1. ENV-style assignments (the \1 back-reference, emulated).
		{"1 env unquoted", "OPENAI_API_KEY=" + alpha26, "OPENAI_API_KEY=abcdef…wxyz"},
		// tool payloads match pattern 1 in upper case only (OpenClaw's
		// tool-payload variant); logs in any case (TestLogPatternOneAnyCase)
		{"1 env colon upper-case", "TOKEN: abc", "TOKEN: ***"},
		{"1 env colon lower-case", "token: abc", "token: abc"},
		{"1 env double quoted", `MY_API_KEY="abc"`, `MY_API_KEY="***"`},
		{"1 env single quoted", "DB_SECRET='" + alpha26 + "'", "DB_SECRET='abcdef…wxyz'"},
		// The [B] standalone-assignment pattern runs later and re-masks the
		// quoted value as a whole.
		{"1 then B standalone", `API_KEY="abc"`, "API_KEY=***"},
		{"1 env passwd", "DB_PASSWD = hunter2", "DB_PASSWD = ***"},
		{"1 neg: key must end at a boundary", "KEYBOARD=xyz", "KEYBOARD=xyz"},
		{"1 neg: needs = or :", "monkey business", "monkey business"},
		{"1 neg: unmatched quote", `MY_TOKEN="abc`, `MY_TOKEN="abc`},
		{"1 neg: mismatched quotes", `MY_TOKEN="abc'`, `MY_TOKEN="abc'`},
		// 2. JSON fields.
		{"2 json apiKey", `{"apiKey":"` + alpha26 + `"}`, `{"apiKey":"abcdef…wxyz"}`},
		{"2 json refreshToken", `{"refreshToken" : "r1"}`, `{"refreshToken" : "***"}`},
		{"2 neg: other field", `{"apiKeys":"` + alpha26 + `"}`, `{"apiKeys":"` + alpha26 + `"}`},
		// 3. CLI flags (the \1 back-reference, emulated).
		{"3 cli api-key", "--api-key " + alpha26, "--api-key abcdef…wxyz"},
		{"3 cli quoted", `run --password "hunter2" now`, `run --password "***" now`},
		{"3 cli hook_token", "--hook_token 'abc'", "--hook_token '***'"},
		{"3 neg: longer flag", "--tokens abc", "--tokens abc"},
		{"3 neg: unmatched quote", `--secret "abc`, `--secret "abc`},
		// 4. Authorization header.
		{"4 authorization", "Authorization: Bearer abc.def", "Authorization: Bearer ***"},
		{"4 authorization long", "authorization=bearer " + alpha26, "authorization=bearer abcdef…wxyz"},
		{"4 neg: basic auth", "Authorization: Basic abc", "Authorization: Basic abc"},
		// 5. Bare bearer tokens.
		{"5 bearer", "use Bearer " + alpha26 + " now", "use Bearer abcdef…wxyz now"},
		{"5 neg: short bearer", "Bearer short", "Bearer short"},
		// 6. PEM private keys.
		{"6 pem", "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\ndef\n-----END RSA PRIVATE KEY-----",
			"-----BEGIN RSA PRIVATE KEY-----\n…redacted…\n-----END RSA PRIVATE KEY-----"},
		{"6 neg: public key", "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----",
			"-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----"},
		// 7-15. Vendor prefixes.
		{"7 sk short token", "key sk-abcdefgh here", "key *** here"},
		{"7 sk long", "sk-proj-abcdefghijklmnop", "sk-pro…mnop"},
		{"7 neg: too short", "sk-abc", "sk-abc"},
		{"7 neg: no word boundary", "task-abcdefghij", "task-abcdefghij"},
		{"8 ghp", "ghp_abcdefghijklmnopqrst", "ghp_ab…qrst"},
		{"8 neg: 19 chars", "ghp_abcdefghijklmnopqrs", "ghp_abcdefghijklmnopqrs"},
		{"9 github_pat", "github_pat_abcdefghij_klmnopqrst", "github…qrst"},
		{"9 neg: short", "github_pat_abc", "github_pat_abc"},
		{"10 slack", "xoxb-1234567890-abc", "xoxb-1…-abc"},
		{"10 neg: unknown kind", "xoxz-1234567890-abc", "xoxz-1234567890-abc"},
		{"11 xapp", "xapp-1-A1234567890", "xapp-1…7890"},
		{"11 neg: short", "xapp-123", "xapp-123"},
		{"12 groq", "gsk_abcdefghij", "***"},
		{"12 neg: short", "gsk_abc", "gsk_abc"},
		{"13 google", "AIzaSyA1234567890abcdefghij", "AIzaSy…ghij"},
		{"13 neg: 19 chars", "AIza1234567890123456789", "AIza1234567890123456789"},
		{"14 perplexity", "pplx-abcdefghijklmn", "pplx-a…klmn"},
		{"14 neg: short", "pplx-abc", "pplx-abc"},
		{"15 npm", "npm_abcdefghij", "***"},
		{"15 neg: underscore not allowed", "npm_abc_defghij", "npm_abc_defghij"},
		// 16-17. Telegram.
		{"16 telegram url", "https://api.telegram.org/bot123456:ABCDEFGHIJKLMNOPQRST/getMe",
			"https://api.telegram.org/bot123456…QRST/getMe"},
		{"16 neg: five digits", "/bot12345:ABCDEFGHIJKLMNOPQRST/", "/bot12345:ABCDEFGHIJKLMNOPQRST/"},
		{"17 telegram bare", "123456789:ABCDEFGHIJKLMNOPQRSTUV", "123456…STUV"},
		{"17 neg: a time", "meet at 12:30 today", "meet at 12:30 today"},
		// [B] additions.
		{"B url query", "https://x.test/cb?signature=" + alpha26 + "&page=2", "https://x.test/cb?signature=abcdef…wxyz&page=2"},
		{"B url query client_secret", "?client_secret=abc", "?client_secret=***"},
		{"B neg: url query other key", "https://x.test/?signatures=abc&page=2", "https://x.test/?signatures=abc&page=2"},
		{"B standalone", `x,secret=abc\def`, "x,secret=***"},
		{"B neg: standalone other key", "foo=bar", "foo=bar"},
		{"B akid", "AKIDabcdefghij", "***"},
		{"B ltai", "LTAIabcdefghijklmnop", "LTAIab…mnop"},
		{"B hf", "hf_abcdefghij", "***"},
		{"B r8", "r8_abcdefghijklmnopqrst", "r8_abc…qrst"},
		{"B neg: hf short", "hf_short", "hf_short"},
	})
}

func TestMaskingRules(t *testing.T) {
	json := func(v string) string { return `{"token":"` + v + `"}` }
	emoji := "😀"
	runRedact(t, DefaultRedactor(), []redactCase{
		{"17 units masked fully", json(alpha26[:17]), json("***")},
		{"18 units keep 6 and 4", json(alpha26[:18]), json("abcdef…opqr")},
		{"astral counts two units", json(strings.Repeat(emoji, 9)), json(strings.Repeat(emoji, 3) + "…" + strings.Repeat(emoji, 2))},
		{"17 units with astral", json(strings.Repeat(emoji, 8) + "a"), json("***")},
		{"never split a pair", json("abcde" + emoji + "0123456789abc" + emoji), json("abcde…bc" + emoji)},
		{"prefix is kept", "MY_SECRET=SECRET", "MY_SECRET=***"},
		{"token replaced where captured", "PASSWORD=PASS", "PASSWORD=***"},
		{"dollar signs are literal", "KEY=$&" + alpha26, "KEY=$&abcd…wxyz"},
		{"pem crlf", "-----BEGIN EC PRIVATE KEY-----\r\nabc\r\n\r\n-----END EC PRIVATE KEY-----",
			"-----BEGIN EC PRIVATE KEY-----\n…redacted…\n-----END EC PRIVATE KEY-----"},
		{"pem on one line", "-----BEGIN PRIVATE KEY-----MIIE-----END PRIVATE KEY-----", "***"},
		// Case-insensitive match without the literal "PRIVATE KEY-----": the
		// whole match is the token.
		{"pem lower case", "-----begin private key-----\nx\n-----end private key-----", "-----b…----"},
		{"JavaScript whitespace", "TOKEN:\u00a0abc", "TOKEN:\u00a0***"},
		// JavaScript's i flag never folds non-ASCII onto ASCII: "ſ" is not "s"
		// and the Kelvin sign is not "k".
		{"no long-s folding", "ſecret=abc", "ſecret=abc"},
		{"no kelvin folding", "\u212aey=abc", "\u212aey=abc"},
		{"sequential patterns", "OPENAI_API_KEY=sk-" + alpha26, "OPENAI_API_KEY=sk-abc…wxyz"},
		{"empty", "", ""},
	})
}

func TestRedactChunking(t *testing.T) {
	secret := "ghp_" + strings.Repeat("A", 36)
	masked := "ghp_AA…AAAA"
	// A secret straddling the 16384-unit boundary survives, as in the
	// reference, once the text exceeds 32768 units.
	pre := strings.Repeat("x ", 8190) // 16380 units
	tail := strings.Repeat(" y", 9000)
	in := pre + secret + tail + " " + secret + tail
	got, _ := DefaultRedactor().ToolPayload(in)
	if !strings.Contains(got[:len(pre)+len(secret)], secret) {
		t.Fatal("straddling secret should survive chunking")
	}
	if strings.Count(got, masked) != 1 || strings.Count(got, secret) != 1 {
		t.Fatalf("want exactly one masked secret, got %d masked / %d raw", strings.Count(got, masked), strings.Count(got, secret))
	}
	// At or below the threshold the whole text is one regex input.
	short := strings.Repeat("x ", 8190) + secret + strings.Repeat(" ", 32768-16380-len(secret))
	if utf16Len(short) != 32768 {
		t.Fatalf("setup: %d units", utf16Len(short))
	}
	if got, _ := DefaultRedactor().ToolPayload(short); strings.Contains(got, secret) {
		t.Fatal("32768-unit text must not be chunked")
	}
	// The grid is in UTF-16 units: astral characters shift the byte offsets.
	astral := strings.Repeat("😀", 8190) + "xx" + secret + tail + tail
	if got, _ := DefaultRedactor().ToolPayload(astral); !strings.Contains(got, secret) {
		t.Fatal("chunk boundary must be counted in UTF-16 units")
	}
}

func TestUTF16Chunks(t *testing.T) {
	s := strings.Repeat("a", 5) + "😀" + "bcd"
	got := utf16Chunks(s, 3)
	want := []string{"aaa", "aa", "😀bc", "d"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestUserPatterns(t *testing.T) {
	secret := "ghp_" + strings.Repeat("B", 36)
	r, err := NewRedactor("", []string{"internal-[0-9]+", "/Case-\\d+/", "/flag-x/i", "   ", " /lit/ "})
	if err != nil {
		t.Fatal(err)
	}
	// "/source/flags" must be the whole entry: " /lit/ " is the literal
	// pattern "/lit/" (compiled gi), as in the reference.
	in := "id internal-12345 " + secret + " Case-1 CASE-2 FLAG-X /LIT/"
	got, changed := r.ToolPayload(in)
	if want := "id *** ghp_BB…BBBB *** CASE-2 *** ***"; got != want || !changed {
		t.Fatalf("ToolPayload = %q, want %q", got, want)
	}
	// Log redaction: user patterns replace the defaults.
	if got, want := r.Log(in), "id *** "+secret+" *** CASE-2 *** ***"; got != want {
		t.Fatalf("Log = %q, want %q", got, want)
	}
	// User patterns run before the defaults.
	// (Defaults first would give "TOKEN=***Z…ZZZZ".)
	r2, _ := NewRedactor("", []string{`Z{5}`})
	if got, _ := r2.ToolPayload("TOKEN=" + strings.Repeat("Z", 20)); got != "TOKEN=***" {
		t.Fatalf("user pattern first: %q", got)
	}
	// Blank-only lists mean no user patterns.
	r3, _ := NewRedactor("", []string{" ", ""})
	if got := r3.Log(secret); got == secret {
		t.Fatal("blank user patterns must leave the defaults in place")
	}
}

func TestRedactModes(t *testing.T) {
	secret := "ghp_" + strings.Repeat("C", 36)
	off, err := NewRedactor("off", nil)
	if err != nil {
		t.Fatal(err)
	}
	if off.Log(secret) != secret {
		t.Fatal("off disables log redaction")
	}
	if got, _ := off.ToolPayload(secret); got == secret {
		t.Fatal("tool payload redaction is always on")
	}
	for _, mode := range []string{"", "tools", "on", "OFF"} {
		r, _ := NewRedactor(mode, nil)
		if r.Log(secret) == secret {
			t.Fatalf("mode %q should redact logs", mode)
		}
	}
}

func TestUserPatternErrors(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"(", "invalid"},
		{`(a)\1`, "back-reference"},
		{`foo(?=bar)`, "lookahead"},
		{`(?<=a)b`, "lookbehind"},
		{`\k<n>`, "back-reference"},
		{"(a+)+", "unsafe"},
		{"(a*)*b", "unsafe"},
		{"(x+x+)+y", "unsafe"},
		{"(a|ab)*", "unsafe"},
		{"/x/ii", "duplicate flag"},
		{"a{3,1}", "invalid"},
	} {
		_, err := NewRedactor("", []string{tc.pattern})
		if err == nil {
			t.Fatalf("pattern %q should be rejected", tc.pattern)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "logging.redactPatterns") ||
			!strings.Contains(err.Error(), fmt.Sprintf("%q", tc.pattern)) {
			t.Fatalf("pattern %q: error %q should mention %q, the key and the pattern", tc.pattern, err, tc.want)
		}
	}
	for _, ok := range []string{"(ab)+", "a{2}b+", "(a|b)+", "[a-z]+@[a-z]+", "(?:x)?y"} {
		if _, err := NewRedactor("", []string{ok}); err != nil {
			t.Fatalf("pattern %q should be accepted: %v", ok, err)
		}
	}
}

func TestDefaultPatternsCompile(t *testing.T) {
	if len(defaults()) != len(defaultPatterns) {
		t.Fatal("every default pattern must compile")
	}
	if len(defaultPatterns) != 17+6 {
		t.Fatalf("17 reference patterns plus 6 [B] additions, have %d", len(defaultPatterns))
	}
}

// The prefilter must never hide a match: each pattern's needles must be
// implied by the pattern, checked here by running every pattern with and
// without its prefilter over the test corpus.
func TestPrefilterIsSound(t *testing.T) {
	corpus := []string{
		"OPENAI_API_KEY=" + alpha26, `{"apiKey":"` + alpha26 + `"}`, "--api-key " + alpha26,
		"Authorization: Bearer abc.def", "Bearer " + alpha26, "sk-" + alpha26, "ghp_" + alpha26,
		"github_pat_" + alpha26, "xoxb-" + alpha26, "xapp-" + alpha26, "gsk_" + alpha26, "AIza" + alpha26,
		"pplx-" + alpha26, "npm_" + alpha26, "bot123456:" + alpha26, "123456:" + alpha26,
		"?token=" + alpha26, " secret=" + alpha26, "AKID" + alpha26, "LTAI" + alpha26, "hf_" + alpha26, "r8_" + alpha26,
		"-----BEGIN PRIVATE KEY-----\na\nb\n-----END PRIVATE KEY-----",
	}
	for i, p := range defaults() {
		for _, in := range corpus {
			upper := strings.ToUpper(in)
			for _, s := range []string{in, upper} {
				if p.re.re.MatchString(s) {
					lower := asciiLower(s)
					hit := false
					for _, n := range p.needles {
						hit = hit || strings.Contains(lower, n)
					}
					if !hit {
						t.Fatalf("pattern %d matches %q but its prefilter %v rejects it", i+1, s, p.needles)
					}
				}
			}
		}
	}
}

// TestLogPatternOneAnyCase: log redaction keeps OpenClaw's log defaults,
// whose ENV-style pattern matches any case.
func TestLogPatternOneAnyCase(t *testing.T) {
	if got := DefaultRedactor().Log("token: abc"); got != "token: ***" {
		t.Fatalf("Log = %q", got)
	}
}

// TestUserMaskNotMaskedTwice: a token a logging.redactPatterns entry
// already masked (first 6 … last 4) is not masked a second time by the
// defaults: neither the ENV-style pattern (case-sensitive in tool
// payloads) nor the standalone-assignment one (which finds a mask there).
func TestUserMaskNotMaskedTwice(t *testing.T) {
	r, err := NewRedactor("", []string{`/token=(\S+)/i`})
	if err != nil {
		t.Fatal(err)
	}
	runRedact(t, r, []redactCase{
		{"user mask kept", "deploy with token=" + alpha26 + " now", "deploy with token=abcdef…wxyz now"},
		{"at the start", "token=" + alpha26, "token=abcdef…wxyz"},
		{"upper case", "TOKEN=" + alpha26, "TOKEN=abcdef…wxyz"},
		// a short token masks to *** once, and stays ***
		{"short", "token=abc", "token=***"},
	})
	// a default's own mask is stable too: redacting twice changes nothing
	once, _ := DefaultRedactor().ToolPayload("key ghp_" + strings.Repeat("Q", 36) + " and api_key=" + alpha26)
	if twice, changed := DefaultRedactor().ToolPayload(once); changed || twice != once {
		t.Fatalf("redacting %q again gave %q", once, twice)
	}
}
