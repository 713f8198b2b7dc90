package bus

import (
	"regexp"
	"strings"
	"testing"
)

var validKV = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

func TestEncodeKey(t *testing.T) {
	cases := map[string]string{
		"agent:main:main":                  "agent.main.main",
		"agent:main:subagent:abc-1":        "agent.main.subagent.abc-1",
		"agent:main:whatsapp:group:1@g.us": "agent.main.whatsapp.group.1=40g=2Eus",
		"a=b":                              "a=3Db",
		"a b":                              "a=20b",
		"agent::broken":                    "agent=3A.broken",
		":lead":                            "=3Alead",
		"trail:":                           "trail=3A",
		"::":                               "=3A=3A",
		"ü":                                "=C3=BC",
		// IPv6 literal in a Matrix room key: the empty segment of "::"
		// is escaped, the other ":" stay token separators.
		"agent:main:matrix:channel:!room:[2001:db8::1]": "agent.main.matrix.channel.=21room.=5B2001.db8=3A.1=5D",
		"agent:main:matrix:channel:!room:[::1]":         "agent.main.matrix.channel.=21room.=5B=3A.1=5D",
	}
	for in, want := range cases {
		got := EncodeKey(in)
		if got != want {
			t.Errorf("EncodeKey(%q) = %q, want %q", in, got, want)
		}
		if !validKV.MatchString(got) || strings.HasPrefix(got, ".") || strings.HasSuffix(got, ".") || strings.Contains(got, "..") {
			t.Errorf("EncodeKey(%q) = %q is not a valid KV key", in, got)
		}
		back, err := DecodeKey(got)
		if err != nil || back != in {
			t.Errorf("DecodeKey(%q) = %q, %v; want %q", got, back, err, in)
		}
	}
}

func FuzzEncodeKey(f *testing.F) {
	for _, s := range []string{"agent:main:main", "::", "a.b=c", "x:y:", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return
		}
		enc := EncodeKey(s)
		if !validKV.MatchString(enc) || strings.HasPrefix(enc, ".") || strings.HasSuffix(enc, ".") || strings.Contains(enc, "..") {
			t.Fatalf("EncodeKey(%q) = %q is not a valid KV key", s, enc)
		}
		back, err := DecodeKey(enc)
		if err != nil || back != s {
			t.Fatalf("round trip %q -> %q -> %q (%v)", s, enc, back, err)
		}
	})
}
