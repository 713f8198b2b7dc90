package bus

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeKey: DecodeKey on any string returns a key or an error, and a
// key it returns encodes to something that decodes to the same key.
func FuzzDecodeKey(f *testing.F) {
	for _, s := range []string{"agent.main.main", "=3A=3A", "a=2Eb=3Dc", "=", "=4", "=zz", "=ff", "..", ".", "x.=3A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, enc string) {
		key, err := DecodeKey(enc)
		if err != nil || key == "" {
			return
		}
		back, err := DecodeKey(EncodeKey(key))
		if err != nil || back != key {
			t.Fatalf("DecodeKey(%q) = %q, which does not survive a round trip: %q %v", enc, key, back, err)
		}
	})
}

// FuzzVerify is token parsing: Verify on any string must refuse it with a
// 401 (only a token the operator minted passes), never panic, and never
// echo a long token back in its message.
func FuzzVerify(f *testing.F) {
	op, err := NewOperator()
	if err != nil {
		f.Fatal(err)
	}
	good, err := op.Mint(Caller{SessionKey: "agent:main:main", AgentID: "main"}, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	other, _ := NewOperator()
	foreign, _ := other.Mint(Caller{SessionKey: "agent:main:main"}, time.Hour)
	parts := strings.Split(good, ".")
	for _, s := range []string{
		"", "x", "a.b.c", "..", good[:len(good)-1], good + "x", foreign,
		parts[0] + "." + parts[1] + ".", parts[0] + ".e30." + parts[2], "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.AAAA",
		strings.Repeat("A", 10000), "\x00\xff.\x00.\x00",
	} {
		f.Add(s)
	}
	v := NewVerifier(op.PublicKey())
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(tok)
		if err == nil {
			// Only a token this operator signed can pass, so whatever the
			// fuzzer reached (base64 has spellings that decode alike) must
			// attest exactly what the one minted token says.
			if c.SessionKey != "agent:main:main" || c.AgentID != "main" || c.Adapter != "" || c.RunID != "" {
				t.Fatalf("Verify accepted %q as %+v, which the operator never minted", tok, c)
			}
			return
		}
		var be *Error
		if !errors.As(err, &be) || be.Code != CodeUnauthorized || be.Message == "" {
			t.Fatalf("Verify(%q): %v, want a 401 with a message", tok, err)
		}
		if len(tok) > 40 && strings.Contains(be.Message, tok) {
			t.Fatalf("the refusal echoes the token back: %q", be.Message)
		}
	})
}
