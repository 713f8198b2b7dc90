package sanitize

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

type stringer string

func (s stringer) String() string { return string(s) }

// Every place a log line can carry text goes through the redactor: the
// message, string, error, Stringer and []byte attributes, groups, attributes
// bound with With, and formatted structs.
func TestLogHandlerRedactsEveryAttr(t *testing.T) {
	secret := "ghp_" + strings.Repeat("Z", 36)
	var buf bytes.Buffer
	r := DefaultRedactor()
	l := slog.New(LogHandler(slog.NewTextHandler(&buf, nil), r)).With("bound", "token "+secret)
	l.WithGroup("g").Info("saw "+secret,
		"s", secret, "err", errors.New("failed: "+secret), "str", stringer(secret), "b", []byte(secret),
		slog.Group("inner", "x", secret), "st", struct{ A string }{secret}, "n", 42)
	out := buf.String()
	if strings.Contains(out, secret) {
		t.Fatalf("a secret reached the log: %s", out)
	}
	if !strings.Contains(out, "ghp_ZZ…ZZZZ") || !strings.Contains(out, "g.n=42") {
		t.Fatalf("the line lost its shape: %s", out)
	}
	off, _ := NewRedactor("off", nil)
	buf.Reset()
	slog.New(LogHandler(slog.NewTextHandler(&buf, nil), off)).Info(secret)
	if !strings.Contains(buf.String(), secret) {
		t.Fatalf("logging.redactSensitive off must leave logs as they are: %s", buf.String())
	}
}

// ErrorText masks secrets in a thrown message but keeps the reference's
// "Unknown sessionKey: <key>" readable: the ENV-style pattern needs an
// upper-case name there.
func TestErrorTextKeepsParameterNames(t *testing.T) {
	r := DefaultRedactor()
	for in, want := range map[string]string{
		"Unknown sessionKey: agent:main:main":                          "Unknown sessionKey: agent:main:main",
		"Unknown sessionKey: agent:main:sk-" + strings.Repeat("a", 20): "Unknown sessionKey: agent:main:sk-aaa…aaaa",
		"bad value MY_API_KEY=" + strings.Repeat("b", 20):              "bad value MY_API_KEY=bbbbbb…bbbb",
	} {
		if got := r.ErrorText(in); got != want {
			t.Errorf("ErrorText(%q) = %q, want %q", in, got, want)
		}
	}
}
