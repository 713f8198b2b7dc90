package rules

import (
	"strings"
	"testing"
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
