package rules

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseParamsEnvelope(t *testing.T) {
	for body, want := range map[string]string{
		"{\"a\":\"\xff\"}": "request body is not valid UTF-8 (bad byte 0xFF at byte 6); send the tool parameters as UTF-8 JSON",
		`{"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`: "parameters nest more than 64 levels deep; no tool parameter nests that deep",
		strings.Repeat("[", 100000):                                       "parameters nest more than 64 levels deep; no tool parameter nests that deep",
		`{"` + strings.Repeat("k", 129) + `":1}`:                          `a parameter name is 129 characters long ("kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk…"); tool parameter names are at most 128 characters`,
		`{"sessionKey":"a","sessionKey":"b"}`:                             `parameter "sessionKey" appears twice in one object; send each parameter once`,
		`{"attachments":[{"name":"a","name":"b"}]}`:                       `parameter "name" appears twice in one object; send each parameter once`,
		`{"message":"a\u0000b"}`:                                          `parameter "message" contains a NUL character (\u0000); remove it`,
		`{"kinds":["x","\u0000"]}`:                                        `parameter "kinds" contains a NUL character (\u0000); remove it`,
		`{"a\u0000":1}`:                                                   `parameter name "a\x00" contains a NUL character (\u0000); remove it`,
	} {
		p, err := ParseParams([]byte(body))
		if err == nil {
			err = p.RefuseNUL()
		}
		wantInputError(t, body[:min(len(body), 60)], err, want)
	}
	// what stays accepted: the same name in sibling objects, 63 levels,
	// a 128-character name, escaped characters other than NUL
	for _, body := range []string{
		`{"attachments":[{"name":"a"},{"name":"b"}],"name":"c"}`,
		`{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`,
		`{"` + strings.Repeat("k", 128) + `":1}`,
		`{"message":"tab\there \u0001 \ud83d\ude00"}`,
	} {
		if p, err := ParseParams([]byte(body)); err != nil || p.RefuseNUL() != nil {
			t.Errorf("%.60s: %v %v", body, err, p.RefuseNUL())
		}
	}
}

// envelopeBodies are bodies around every refusal of checkEnvelope and the
// shapes tools take, for the fast scan's comparison with the token scan.
func envelopeBodies() []string {
	deep := func(n int) string { return `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}` }
	return []string{
		``, `{}`, `[]`, `null`, `1`, `"s"`, `{} {}`, `{"a":1} {"a":1,"a":2}`,
		`{"task":"bench: summarize","label":"bench"}`,
		`{"sessionKey":"agent:main:main","limit":20,"kinds":["main","group"],"includeTools":false,"x":null,"n":-1.5e3}`,
		`{"attachments":[{"name":"a","content":"x"},{"name":"b","content":"y"}],"name":"c"}`,
		`{"attachments":[{"name":"a","name":"b"}]}`, `{"a":{"b":1,"b":2}}`, `{"a":1,"b":{"a":1},"a":2}`,
		`{"sessionKey":"a","sessionKey":"b"}`, `{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"a\"b":1,"a\"b":2}`,
		`{"msg":"quote \" brace } bracket ] \\"}`, `{"msg":"\\","a":1,"a":2}`,
		`{"` + strings.Repeat("k", 128) + `":1}`, `{"` + strings.Repeat("k", 129) + `":1}`,
		`{"` + strings.Repeat("é", 128) + `":1}`, `{"` + strings.Repeat("é", 129) + `":1}`,
		deep(63), deep(64), deep(65), strings.Repeat("[", 100000), strings.Repeat("{", 70),
		`{"a":1,,"a":2}`, `{"a" "a" 1}`, `{1:2,"a":1,"a":2}`, `{"a":[1,2}`, `{"a":"open`, `{"a":tru,"a":1}`,
		`{"a":1}]`, `]{"a":1,"a":2}`, `{"a":{]}`, `{[`, `{"a":1,"a":2`, ` {"a" : 1 , "b" : [ 1 , { "a" : 2 } ] } `,
		`{"message":"tab\there \u0001 \ud83d\ude00"}`,
		`{` + manyNames(cleanScanNames) + `}`, `{` + manyNames(cleanScanNames+1) + `}`, `{` + manyNames(cleanScanNames+1) + `,"n0":1}`,
	}
}

func manyNames(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"n%d":%d`, i, i)
	}
	return strings.Join(parts, ",")
}

// The fast scan never accepts what the token scan refuses, and it does
// accept the ordinary calls (or it would only cost time).
func TestEnvelopeCleanAgreesWithTokenScan(t *testing.T) {
	for _, body := range envelopeBodies() {
		if envelopeClean([]byte(body)) {
			if err := checkEnvelopeTokens([]byte(body)); err != nil {
				t.Errorf("%.60s: fast scan accepts, token scan refuses: %v", body, err)
			}
		}
	}
	for _, body := range []string{
		`{"task":"bench: summarize","label":"bench"}`,
		`{"attachments":[{"name":"a","content":"x"},{"name":"b","content":"y"}],"name":"c"}`,
		`{"msg":"quote \" brace } bracket ] \\"}`,
		`{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`,
		`{"message":"tab\there \u0001 \ud83d\ude00"}`,
	} {
		if !envelopeClean([]byte(body)) {
			t.Errorf("%.60s: an ordinary body takes the token scan", body)
		}
	}
}

func FuzzEnvelopeClean(f *testing.F) {
	for _, body := range envelopeBodies() {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if utf8.Valid(body) && envelopeClean(body) {
			if err := checkEnvelopeTokens(body); err != nil {
				t.Fatalf("%q: fast scan accepts, token scan refuses: %v", body, err)
			}
		}
	})
}
