package bus

import (
	"crypto/sha256"
	"testing"
	"time"
)

// A full cache stays at its bound (the least recently used token goes, in
// O(1)), and a cached token is never accepted past its expiry.
func TestVerifierCacheBoundedAndExpiring(t *testing.T) {
	op, err := NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const size = 64
	v := newVerifier(op.PublicKey(), func() time.Time { return now }, size)
	first, err := op.Mint(Caller{SessionKey: "agent:main:first"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(first); err != nil {
		t.Fatal(err)
	}
	for i := range size + 10 {
		tok, err := op.Mint(Caller{SessionKey: "agent:main:s" + time.Duration(i).String()}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.cache.Len(); n != size {
		t.Fatalf("cache holds %d, want %d", n, size)
	}
	if _, ok := v.cache.Peek(sha256Of(first)); ok {
		t.Fatal("the least recently used token was not evicted")
	}
	// a cached token past its expiry is refused and dropped
	tok, _ := op.Mint(Caller{SessionKey: "agent:main:short"}, time.Minute)
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := v.Verify(tok); err == nil {
		t.Fatal("an expired cached token was accepted")
	}
	if _, ok := v.cache.Peek(sha256Of(tok)); ok {
		t.Fatal("the expired token stayed cached")
	}
}

func sha256Of(token string) [32]byte { return sha256.Sum256([]byte(token)) }
