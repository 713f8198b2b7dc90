package bus

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
)

// A token valid only from the future is refused, as is one whose lifetime
// is above MaxTokenTTL; Mint refuses such a lifetime itself.
func TestTokenNotBeforeAndMaxLifetime(t *testing.T) {
	op, err := NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(op.PublicKey())
	sign := func(nbf time.Time, life time.Duration) string {
		gc := jwt.NewGenericClaims("agent:main:main")
		gc.NotBefore = nbf.Unix()
		gc.Expires = time.Now().Add(life).Unix()
		gc.Data = map[string]any{"sessionKey": "agent:main:main"}
		tok, err := gc.Encode(op.kp)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if _, err := v.Verify(sign(time.Now().Add(time.Hour), 2*time.Hour)); err == nil || !strings.Contains(err.Error(), "not valid before") {
		t.Fatalf("future nbf: %v", err)
	}
	if _, err := v.Verify(sign(time.Now().Add(-time.Minute), time.Hour)); err != nil {
		t.Fatalf("past nbf: %v", err)
	}
	if _, err := v.Verify(sign(time.Time{}, MaxTokenTTL+time.Hour)); err == nil || !strings.Contains(err.Error(), "longer than the maximum") {
		t.Fatalf("lifetime above the maximum: %v", err)
	}
	// iat 10 days ahead and exp a day after it: a day's lifetime counted
	// from iat, eleven days counted from now
	// (signed by hand: jwt's Encode stamps iat with the signer's clock, so
	// this is what a minting host whose clock runs ahead produces)
	ahead := func(iat time.Time, exp time.Time) string {
		gc := jwt.NewGenericClaims("agent:main:main")
		gc.Issuer, gc.IssuedAt, gc.Expires = op.PublicKey(), iat.Unix(), exp.Unix()
		body, err := json.Marshal(gc)
		if err != nil {
			t.Fatal(err)
		}
		enc := base64.RawURLEncoding
		signing := enc.EncodeToString([]byte(`{"typ":"JWT","alg":"ed25519-nkey"}`)) + "." + enc.EncodeToString(body)
		sig, err := op.kp.Sign([]byte(signing))
		if err != nil {
			t.Fatal(err)
		}
		return signing + "." + enc.EncodeToString(sig)
	}
	now := time.Now()
	if _, err := v.Verify(ahead(now.Add(240*time.Hour), now.Add(264*time.Hour))); err == nil || !strings.Contains(err.Error(), "in the future") {
		t.Fatalf("iat 10 days ahead: %v", err)
	}
	if _, err := v.Verify(ahead(now.Add(-time.Hour), now.Add(MaxTokenTTL+2*time.Hour))); err == nil || !strings.Contains(err.Error(), "longer than the maximum") {
		t.Fatalf("iat an hour ago, exp MaxTokenTTL+2h ahead: %v", err)
	}
	// a clock a little ahead on the minting host still works
	if _, err := v.Verify(ahead(now.Add(30*time.Second), now.Add(time.Hour))); err != nil {
		t.Fatalf("iat 30 s ahead (within the skew): %v", err)
	}
	if _, err := op.Mint(Caller{SessionKey: "agent:main:main"}, MaxTokenTTL+time.Second); err == nil || !strings.Contains(err.Error(), "longer than the maximum") {
		t.Fatalf("mint above the maximum: %v", err)
	}
	if _, err := op.Mint(Caller{Adapter: "telegram"}, MaxTokenTTL+time.Second); err == nil {
		t.Fatal("adapter token above the maximum minted")
	}
	if _, err := op.Mint(Caller{SessionKey: "agent:main:main"}, MaxTokenTTL); err != nil {
		t.Fatalf("mint at the maximum: %v", err)
	}
}

type fakeRevocations struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (f *fakeRevocations) RevokedAt(run string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.at[run]
	return at, ok
}

// A revoked run's tokens are refused, cached or not; a token of the same
// run minted after the revocation (a retry) and other runs' tokens pass.
func TestVerifierRevokedRun(t *testing.T) {
	op, err := NewOperator()
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(op.PublicKey())
	rev := &fakeRevocations{at: map[string]time.Time{}}
	v.UseRevocations(rev)
	old, _ := op.Mint(Caller{SessionKey: "agent:main:main", RunID: "r1"}, time.Hour)
	other, _ := op.Mint(Caller{SessionKey: "agent:main:main", RunID: "r2"}, time.Hour)
	if _, err := v.Verify(old); err != nil { // cached from here on
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Microsecond) // the store's resolution
	rev.mu.Lock()
	rev.at["r1"] = at
	rev.mu.Unlock()
	if _, err := v.Verify(old); !isUnauthorized(err) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("cached token of a revoked run: %v", err)
	}
	if _, err := NewVerifier(op.PublicKey()).Verify(old); err != nil {
		t.Fatalf("a verifier without revocations: %v", err)
	}
	if _, err := v.Verify(other); err != nil {
		t.Fatalf("another run's token: %v", err)
	}
	for !time.Now().Truncate(time.Microsecond).After(at) { // the retry mints strictly later
	}
	retry, _ := op.Mint(Caller{SessionKey: "agent:main:main", RunID: "r1"}, time.Hour)
	if _, err := v.Verify(retry); err != nil {
		t.Fatalf("token minted after the revocation: %v", err)
	}
}

func isUnauthorized(err error) bool {
	e, ok := AsError(err)
	return ok && e.Code == CodeUnauthorized
}
